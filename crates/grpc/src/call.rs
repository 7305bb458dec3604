//! A request's call definition (PROTOCOL-HTTP2.md "Requests": Content-Type, Timeout,
//! Message-Encoding, Message-Accept-Encoding) read from its fields in one pass into
//! [`CallHead`], with each refusal naming its answer. The path, the method and metadata are
//! the caller's; deadlines are computed by the caller from `timeout` and its own clock.

use std::fmt;
use std::time::Duration;

use crate::code::Code;
use crate::compress::{self, CompressError, Encoding};
use crate::timeout::{self, TimeoutError};
use crate::web::Protocol;

/// What a request's fields say about the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallHead {
    /// gRPC, gRPC-Web or gRPC-Web text, from `content-type`.
    pub protocol: Protocol,
    /// `grpc-timeout`, if sent (none: no deadline, PROTOCOL-HTTP2.md "If Timeout is omitted a
    /// server should assume an infinite timeout").
    pub timeout: Option<Duration>,
    /// `grpc-encoding`: the request messages' compression (identity if absent).
    pub encoding: Encoding,
    /// Whether `grpc-accept-encoding` lists gzip: the answer may be compressed with it.
    pub accepts_gzip: bool,
}

/// A request whose call definition this side refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallError {
    /// `content-type` is missing or not one this server serves: answer HTTP 415 and no gRPC
    /// status (PROTOCOL-HTTP2.md: "If Content-Type does not begin with "application/grpc",
    /// gRPC servers SHOULD respond with HTTP status of 415").
    UnsupportedMediaType,
    /// A malformed `grpc-timeout`: INTERNAL ([`TimeoutError`]).
    Timeout(TimeoutError),
    /// A `grpc-encoding` this side lacks: UNIMPLEMENTED, the answer carrying
    /// `grpc-accept-encoding: ` [`compress::ACCEPT_ENCODING`].
    Encoding,
}

impl CallError {
    /// The status the call ends with; `None` where the answer is HTTP 415 instead.
    pub const fn code(self) -> Option<Code> {
        match self {
            CallError::UnsupportedMediaType => None,
            CallError::Timeout(e) => Some(e.code()),
            CallError::Encoding => Some(CompressError::Unsupported.code()),
        }
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallError::UnsupportedMediaType => f.write_str("not a gRPC content-type"),
            CallError::Timeout(e) => e.fmt(f),
            CallError::Encoding => f.write_str("unsupported grpc-encoding"),
        }
    }
}

impl std::error::Error for CallError {}

impl CallHead {
    /// Reads the call definition from a request's fields (names lowercase, as HTTP/2 and
    /// HTTP/3 carry them; an HTTP/1.1 caller lowercases them). A field sent twice: the last
    /// one counts, as grpc-go reads them. Other fields are skipped.
    pub fn read<'f>(
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
    ) -> Result<CallHead, CallError> {
        CallHead::read_with(fields, |_, _| {})
    }

    /// [`CallHead::read`], handing every field it does not read to `other` (the caller's
    /// metadata), so a request's fields are gone through once.
    pub fn read_with<'f>(
        fields: impl IntoIterator<Item = (&'f [u8], &'f [u8])>,
        mut other: impl FnMut(&'f [u8], &'f [u8]),
    ) -> Result<CallHead, CallError> {
        let mut protocol = None;
        let mut timeout = None;
        let mut encoding = Encoding::Identity;
        let mut accepts_gzip = false;
        for (name, value) in fields {
            match name {
                b"content-type" => protocol = Protocol::from_content_type(value),
                b"grpc-timeout" => {
                    timeout = Some(timeout::parse(value).map_err(CallError::Timeout)?);
                }
                b"grpc-encoding" => {
                    encoding = Encoding::parse(value).map_err(|_| CallError::Encoding)?;
                }
                b"grpc-accept-encoding" => {
                    accepts_gzip = compress::accepts(Some(value), Encoding::Gzip);
                }
                _ => other(name, value),
            }
        }
        let protocol = protocol.ok_or(CallError::UnsupportedMediaType)?;
        Ok(CallHead {
            protocol,
            timeout,
            encoding,
            accepts_gzip,
        })
    }

    /// The encoding for the answer's messages: `wanted` when the client accepts it, else
    /// identity.
    pub fn response_encoding(&self, wanted: Encoding) -> Encoding {
        match wanted {
            Encoding::Gzip if self.accepts_gzip => Encoding::Gzip,
            _ => Encoding::Identity,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(fields: &[(&str, &str)]) -> Result<CallHead, CallError> {
        CallHead::read(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
    }

    #[test]
    fn call_definitions() {
        // PROTOCOL-HTTP2.md's example request: grpc-timeout 1S, application/grpc+proto, gzip.
        let head = read(&[
            (":method", "POST"),
            (":path", "/google.pubsub.v2.PublisherService/CreateTopic"),
            ("grpc-timeout", "1S"),
            ("content-type", "application/grpc+proto"),
            ("grpc-encoding", "gzip"),
            ("authorization", "Bearer y235"),
        ]);
        assert_eq!(
            head,
            Ok(CallHead {
                protocol: Protocol::Grpc,
                timeout: Some(Duration::from_secs(1)),
                encoding: Encoding::Gzip,
                accepts_gzip: false,
            })
        );
        let head = read(&[
            ("content-type", "application/grpc-web-text"),
            ("grpc-accept-encoding", "identity,deflate,gzip"),
        ])
        .unwrap();
        assert_eq!(
            (head.protocol, head.timeout, head.encoding),
            (Protocol::WebText, None, Encoding::Identity)
        );
        assert_eq!(head.response_encoding(Encoding::Gzip), Encoding::Gzip);
        let plain = read(&[("content-type", "application/grpc")]).unwrap();
        assert_eq!(plain.response_encoding(Encoding::Gzip), Encoding::Identity);
        // The last of two fields counts.
        let twice = read(&[
            ("content-type", "text/plain"),
            ("content-type", "application/grpc"),
            ("grpc-timeout", "5S"),
            ("grpc-timeout", "2m"),
        ]);
        assert_eq!(twice.map(|h| h.timeout), Ok(Some(Duration::from_millis(2))));
    }

    #[test]
    fn refusals() {
        // Each row: the fields, the refusal, the status it ends the call with (None: HTTP 415).
        type Row = (
            &'static [(&'static str, &'static str)],
            CallError,
            Option<Code>,
        );
        let table: &[Row] = &[
            (&[], CallError::UnsupportedMediaType, None),
            (
                &[("content-type", "application/json")],
                CallError::UnsupportedMediaType,
                None,
            ),
            (
                &[("content-type", "application/grpc+json")],
                CallError::UnsupportedMediaType,
                None,
            ),
            (
                &[("content-type", "application/grpc"), ("grpc-timeout", "1x")],
                CallError::Timeout(TimeoutError::Malformed),
                Some(Code::Internal),
            ),
            (
                &[
                    ("content-type", "application/grpc"),
                    ("grpc-encoding", "snappy"),
                ],
                CallError::Encoding,
                Some(Code::Unimplemented),
            ),
        ];
        for &(fields, err, code) in table {
            assert_eq!(read(fields), Err(err), "{fields:?}");
            assert_eq!(err.code(), code);
        }
    }

    #[test]
    fn fields_not_read_go_to_the_caller_once_each() {
        let fields: &[(&[u8], &[u8])] = &[
            (b"content-type", b"application/grpc"),
            (b"x-user", b"ada"),
            (b"grpc-timeout", b"1S"),
            (b"te", b"trailers"),
        ];
        let mut others = Vec::new();
        let call = CallHead::read_with(fields.iter().copied(), |n, v| others.push((n, v))).unwrap();
        assert_eq!(call.protocol, Protocol::Grpc);
        assert_eq!(call.timeout, Some(Duration::from_secs(1)));
        assert_eq!(
            others,
            [(&b"x-user"[..], &b"ada"[..]), (b"te", b"trailers")]
        );
    }
}
