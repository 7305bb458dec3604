//! The parse error enum and the wire action each variant maps to.
//!
//! Every way a request can be malformed is one variant; [`ParseError::status`] says which status
//! the server answers with. After any of them the message framing can no longer be trusted, so
//! every variant also means "close the connection after the response" ([`ParseError::closes`]).
#![forbid(unsafe_code)]

use std::fmt;

/// Why a request was rejected. Each variant names the RFC rule it enforces in its doc line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParseError {
    /// Method is not a token (RFC 9112 §3.1).
    InvalidMethod,
    /// Method token longer than [`crate::MAX_METHOD_BYTES`]: a method the server does not
    /// implement (RFC 9112 §3 SHOULD): 501.
    MethodTooLong,
    /// The path pct-encodes NUL, CR or LF (`%00`, `%0D`, `%0A`): no file or route has such a
    /// name, and passing it on invites header injection and truncation downstream: 400.
    EncodedControlInPath,
    /// Request-target has a byte outside RFC 3986, a bad pct-encoding, or an unusable form
    /// (RFC 9112 §3.2).
    InvalidTarget,
    /// HTTP-version is not `HTTP/DIGIT.DIGIT`, or the request line has extra parts (RFC 9112 §2.3, §3).
    InvalidVersion,
    /// HTTP major version other than 1 (RFC 9110 §6.2): 505.
    VersionNotSupported,
    /// A line ended in LF without CR (RFC 9112 §2.2; linerate does not accept bare LF).
    BareLf,
    /// Field name is empty or not a token (RFC 9110 §5.1).
    InvalidHeaderName,
    /// Whitespace between field name and colon (RFC 9112 §5.1: MUST be 400).
    WhitespaceBeforeColon,
    /// A field line starting with SP/HTAB: obs-fold (RFC 9112 §5.2: rejected with 400).
    ObsFold,
    /// Field value holds CR, NUL, DEL or another control (RFC 9110 §5.5).
    InvalidHeaderValue,
    /// HTTP/1.1 request without Host (RFC 9112 §3.2).
    MissingHost,
    /// More than one Host field line (RFC 9112 §3.2).
    DuplicateHost,
    /// Host value that is not uri-host [":" port] (RFC 9112 §3.2).
    InvalidHost,
    /// Content-Length that is not 1*DIGIT, overflows, or has differing members (RFC 9112 §6.3).
    InvalidContentLength,
    /// Both Content-Length and Transfer-Encoding (RFC 9112 §6.1: treated as an error).
    ContentLengthWithTransferEncoding,
    /// Transfer-Encoding on an HTTP/1.0 request (RFC 9112 §6.1).
    TransferEncodingOnHttp10,
    /// Transfer-Encoding that is empty or not a list of tokens (RFC 9112 §6.1).
    InvalidTransferEncoding,
    /// Transfer-Encoding whose final coding is not chunked, or chunked applied twice
    /// (RFC 9112 §6.3 rule 4, §7).
    ChunkedNotFinal,
    /// A transfer coding linerate does not implement (RFC 9112 §6.1): 501.
    UnsupportedTransferCoding,
    /// Expect with an expectation other than 100-continue (RFC 9110 §10.1.1): 417.
    UnsupportedExpectation,
    /// Request line longer than the head limit: 414.
    UriTooLong,
    /// Head larger than the head limit: 431.
    HeadersTooLarge,
    /// More field lines than the header-count limit: 431.
    TooManyHeaders,
    /// Chunk size that is not 1*HEXDIG or is followed by junk (RFC 9112 §7.1).
    InvalidChunkSize,
    /// Chunk size that does not fit in 64 bits.
    ChunkSizeOverflow,
    /// Chunk extensions longer than the chunk-extension limit, or with control bytes.
    InvalidChunkExtension,
    /// Chunk data not followed by CRLF: the size disagrees with the data (RFC 9112 §7.1).
    InvalidChunkData,
    /// A malformed trailer field line (RFC 9112 §7.1.2).
    InvalidTrailer,
    /// Trailer section over the trailer limits: 431.
    TrailersTooLarge,
}

impl ParseError {
    /// Every variant, in declaration order: `ALL[e.index()] == e`. Lets per-kind counters be
    /// a plain array.
    pub const ALL: [ParseError; 30] = {
        use ParseError::*;
        [
            InvalidMethod,
            MethodTooLong,
            EncodedControlInPath,
            InvalidTarget,
            InvalidVersion,
            VersionNotSupported,
            BareLf,
            InvalidHeaderName,
            WhitespaceBeforeColon,
            ObsFold,
            InvalidHeaderValue,
            MissingHost,
            DuplicateHost,
            InvalidHost,
            InvalidContentLength,
            ContentLengthWithTransferEncoding,
            TransferEncodingOnHttp10,
            InvalidTransferEncoding,
            ChunkedNotFinal,
            UnsupportedTransferCoding,
            UnsupportedExpectation,
            UriTooLong,
            HeadersTooLarge,
            TooManyHeaders,
            InvalidChunkSize,
            ChunkSizeOverflow,
            InvalidChunkExtension,
            InvalidChunkData,
            InvalidTrailer,
            TrailersTooLarge,
        ]
    };

    /// This variant's place in [`ParseError::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// A stable snake_case name for metrics and logs (`obs_fold`, `invalid_chunk_size`…).
    pub fn name(self) -> &'static str {
        use ParseError::*;
        match self {
            InvalidMethod => "invalid_method",
            MethodTooLong => "method_too_long",
            EncodedControlInPath => "encoded_control_in_path",
            InvalidTarget => "invalid_target",
            InvalidVersion => "invalid_version",
            VersionNotSupported => "version_not_supported",
            BareLf => "bare_lf",
            InvalidHeaderName => "invalid_header_name",
            WhitespaceBeforeColon => "whitespace_before_colon",
            ObsFold => "obs_fold",
            InvalidHeaderValue => "invalid_header_value",
            MissingHost => "missing_host",
            DuplicateHost => "duplicate_host",
            InvalidHost => "invalid_host",
            InvalidContentLength => "invalid_content_length",
            ContentLengthWithTransferEncoding => "content_length_with_transfer_encoding",
            TransferEncodingOnHttp10 => "transfer_encoding_on_http10",
            InvalidTransferEncoding => "invalid_transfer_encoding",
            ChunkedNotFinal => "chunked_not_final",
            UnsupportedTransferCoding => "unsupported_transfer_coding",
            UnsupportedExpectation => "unsupported_expectation",
            UriTooLong => "uri_too_long",
            HeadersTooLarge => "headers_too_large",
            TooManyHeaders => "too_many_headers",
            InvalidChunkSize => "invalid_chunk_size",
            ChunkSizeOverflow => "chunk_size_overflow",
            InvalidChunkExtension => "invalid_chunk_extension",
            InvalidChunkData => "invalid_chunk_data",
            InvalidTrailer => "invalid_trailer",
            TrailersTooLarge => "trailers_too_large",
        }
    }

    /// The status code to answer with.
    pub fn status(self) -> u16 {
        use ParseError::*;
        match self {
            VersionNotSupported => 505,
            UnsupportedTransferCoding | MethodTooLong => 501,
            UnsupportedExpectation => 417,
            UriTooLong => 414,
            HeadersTooLarge | TooManyHeaders | TrailersTooLarge => 431,
            _ => 400,
        }
    }

    /// Whether the connection must close after the error response. Always true: once a
    /// message is rejected its framing is unknown and reading on would risk request smuggling.
    pub fn closes(self) -> bool {
        true
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ParseError::*;
        let s = match self {
            InvalidMethod => "invalid method token",
            MethodTooLong => "method too long (not implemented)",
            EncodedControlInPath => "NUL, CR or LF pct-encoded in the path",
            InvalidTarget => "invalid request-target",
            InvalidVersion => "invalid HTTP-version or request line",
            VersionNotSupported => "HTTP major version not supported",
            BareLf => "line ending without CR",
            InvalidHeaderName => "invalid field name",
            WhitespaceBeforeColon => "whitespace between field name and colon",
            ObsFold => "obsolete line folding",
            InvalidHeaderValue => "invalid byte in field value",
            MissingHost => "HTTP/1.1 request without Host",
            DuplicateHost => "more than one Host",
            InvalidHost => "invalid Host value",
            InvalidContentLength => "invalid or conflicting Content-Length",
            ContentLengthWithTransferEncoding => "both Content-Length and Transfer-Encoding",
            TransferEncodingOnHttp10 => "Transfer-Encoding on HTTP/1.0",
            InvalidTransferEncoding => "malformed Transfer-Encoding",
            ChunkedNotFinal => "chunked is not the final transfer coding",
            UnsupportedTransferCoding => "unsupported transfer coding",
            UnsupportedExpectation => "unsupported expectation",
            UriTooLong => "request line too long",
            HeadersTooLarge => "request head too large",
            TooManyHeaders => "too many header fields",
            InvalidChunkSize => "invalid chunk size",
            ChunkSizeOverflow => "chunk size overflows",
            InvalidChunkExtension => "invalid or too long chunk extension",
            InvalidChunkData => "chunk data does not match its size",
            InvalidTrailer => "invalid trailer field",
            TrailersTooLarge => "trailer section too large",
        };
        f.write_str(s)
    }
}

impl std::error::Error for ParseError {}
