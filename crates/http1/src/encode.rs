//! Response head encoding and status reason phrases.
//!
//! Owns the bytes of a response head: status line, Server, Date, Content-Type, Content-Length,
//! Connection and caller fields, appended to the caller's buffer. It does not validate caller
//! fields: the server's response builder guarantees they hold no CR, LF or NUL.

/// The interim response sent for `Expect: 100-continue`.
pub const CONTINUE_100: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The reason phrase for a status code ("" for codes without one; the phrase is optional
/// on the wire, RFC 9112 §4).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// Whether a response with this status carries no content and no Content-Length
/// (RFC 9110 §8.6, §15.3.5: 1xx and 204; 304 repeats what a GET would send, so callers
/// pass its length explicitly if they want one).
pub fn status_has_no_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

/// The parts of a response head.
#[derive(Clone, Copy, Debug)]
pub struct ResponseHead<'a> {
    /// Status code, 100–999.
    pub status: u16,
    /// `Server` value, if any.
    pub server: Option<&'a [u8]>,
    /// The cached `Date` value (see [`crate::DateCache`]).
    pub date: &'a [u8],
    /// `Content-Type` value, if any.
    pub content_type: Option<&'a [u8]>,
    /// `Content-Length` value; omitted for statuses without content.
    pub content_length: u64,
    /// Add `Connection: close`.
    pub close: bool,
    /// Add `Connection: keep-alive` (for HTTP/1.0 clients that asked for it).
    pub keep_alive_10: bool,
}

impl ResponseHead<'_> {
    /// Appends the status line and fields, without the blank line that ends the head,
    /// so the caller can add its own fields with [`write_field`] and then [`end_head`].
    pub fn write_start(&self, out: &mut Vec<u8>) {
        self.write_fixed(out);
        self.write_varying(out);
    }

    /// The part of the head that only depends on the status, Server, Date and Content-Type:
    /// the status line and those fields. [`HeadCache`](crate::HeadCache) keeps it rendered.
    pub fn write_fixed(&self, out: &mut Vec<u8>) {
        // One reservation for the whole head; literal pieces are joined so a head is a handful
        // of copies.
        let server = self.server.unwrap_or(b"");
        let ct = self.content_type.unwrap_or(b"");
        out.reserve(160 + server.len() + self.date.len() + ct.len());
        if self.status == 200 {
            out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        } else {
            out.extend_from_slice(b"HTTP/1.1 ");
            let mut code = itoa::Buffer::new();
            out.extend_from_slice(code.format(self.status).as_bytes());
            out.push(b' ');
            out.extend_from_slice(reason(self.status).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if self.server.is_some() {
            out.extend_from_slice(b"Server: ");
            out.extend_from_slice(server);
            out.extend_from_slice(b"\r\nDate: ");
        } else {
            out.extend_from_slice(b"Date: ");
        }
        out.extend_from_slice(self.date);
        if self.content_type.is_some() {
            out.extend_from_slice(b"\r\nContent-Type: ");
            out.extend_from_slice(ct);
        }
        out.extend_from_slice(b"\r\n");
    }

    /// The part that changes from response to response: Content-Length and Connection.
    pub fn write_varying(&self, out: &mut Vec<u8>) {
        if !status_has_no_body(self.status) {
            out.extend_from_slice(b"Content-Length: ");
            let mut n = itoa::Buffer::new();
            out.extend_from_slice(n.format(self.content_length).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        if self.close {
            out.extend_from_slice(b"Connection: close\r\n");
        } else if self.keep_alive_10 {
            out.extend_from_slice(b"Connection: keep-alive\r\n");
        }
    }
}

/// Appends `name: value\r\n`.
#[inline]
pub fn write_field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.reserve(name.len() + value.len() + 4);
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Appends the blank line that ends a head.
#[inline]
pub fn end_head(out: &mut Vec<u8>) {
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_has_length_and_close() {
        let mut out = Vec::new();
        ResponseHead {
            status: 200,
            server: Some(b"linerate"),
            date: b"Thu, 19 Nov 2026 10:00:00 GMT",
            content_type: Some(b"text/plain"),
            content_length: 13,
            close: true,
            keep_alive_10: false,
        }
        .write_start(&mut out);
        end_head(&mut out);
        assert_eq!(
            out,
            b"HTTP/1.1 200 OK\r\nServer: linerate\r\nDate: Thu, 19 Nov 2026 10:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 13\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn no_content_length_on_204_and_1xx() {
        for status in [100, 204] {
            let mut out = Vec::new();
            ResponseHead {
                status,
                server: None,
                date: b"d",
                content_type: None,
                content_length: 0,
                close: false,
                keep_alive_10: false,
            }
            .write_start(&mut out);
            assert!(
                !out.windows(14).any(|w| w == b"Content-Length"),
                "status {status}"
            );
        }
    }
}
