//! Request templates: every request is encoded once, before the run, into the exact bytes sent.
//! A template is repeated `pipeline` times into one buffer, so sending k pipelined requests is
//! one `send` of a prefix. Must not allocate per request during the run.
#![forbid(unsafe_code)]

use std::fmt;

/// One pre-encoded request and the facts the response framer needs about it.
#[derive(Clone, Debug)]
pub struct Template {
    /// The request repeated `pipeline` times.
    pub batch: Vec<u8>,
    /// Length of one request.
    pub len: usize,
    /// The method is HEAD: responses have no body.
    pub head_only: bool,
}

impl Template {
    /// Wraps one encoded request, repeated `pipeline` times.
    pub fn new(one: &[u8], pipeline: usize) -> Template {
        let head_only = one.starts_with(b"HEAD ");
        Template {
            batch: one.repeat(pipeline),
            len: one.len(),
            head_only,
        }
    }

    /// The first `k` requests of the batch.
    pub fn first(&self, k: usize) -> &[u8] {
        &self.batch[..k * self.len]
    }
}

/// A `--raw` file that is not one HTTP/1.1 request.
#[derive(Debug, PartialEq, Eq)]
pub enum RawError {
    Empty,
    NoHeadEnd,
    RequestLine,
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RawError::Empty => "the file is empty",
            RawError::NoHeadEnd => "no blank line (CRLF CRLF) ends the request head",
            RawError::RequestLine => "the first line is not `METHOD target HTTP/1.x`",
        })
    }
}

impl std::error::Error for RawError {}

/// Encodes `METHOD path HTTP/1.1` with Host, the user's headers, and a body if any.
/// The user's `Host` or `Content-Length` replaces ours.
pub fn encode(
    method: &str,
    path: &str,
    authority: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    let mut out = Vec::with_capacity(128 + body.len());
    out.extend_from_slice(format!("{method} {path} HTTP/1.1\r\n").as_bytes());
    if !has("host") {
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    for (n, v) in headers {
        out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
    }
    if !body.is_empty() && !has("content-length") && !has("transfer-encoding") {
        out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

/// Checks that raw bytes start with a request line and contain a complete head.
pub fn check_raw(bytes: &[u8]) -> Result<(), RawError> {
    if bytes.is_empty() {
        return Err(RawError::Empty);
    }
    memchr::memmem::find(bytes, b"\r\n\r\n").ok_or(RawError::NoHeadEnd)?;
    let line_end = memchr::memchr(b'\r', bytes).unwrap_or(bytes.len());
    let line = &bytes[..line_end];
    let mut parts = line.split(|&b| b == b' ');
    let ok = matches!(
        (parts.next(), parts.next(), parts.next(), parts.next()),
        (Some(m), Some(t), Some(v), None) if !m.is_empty() && !t.is_empty() && v.starts_with(b"HTTP/1.")
    );
    if ok {
        Ok(())
    } else {
        Err(RawError::RequestLine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_with_host_and_length() {
        let h = vec![("X-A".to_string(), "1".to_string())];
        let r = encode("POST", "/p", "h:1", &h, b"abc");
        assert_eq!(
            r,
            b"POST /p HTTP/1.1\r\nHost: h:1\r\nX-A: 1\r\nContent-Length: 3\r\n\r\nabc"
        );
        let h = vec![("host".to_string(), "other".to_string())];
        assert_eq!(
            encode("GET", "/", "h", &h, b""),
            b"GET / HTTP/1.1\r\nhost: other\r\n\r\n"
        );
    }

    #[test]
    fn batch_repeats() {
        let t = Template::new(b"HEAD / HTTP/1.1\r\n\r\n", 3);
        assert!(t.head_only);
        assert_eq!(t.first(2).len(), 2 * t.len);
    }

    #[test]
    fn raw_checked() {
        assert_eq!(check_raw(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Ok(()));
        assert_eq!(check_raw(b""), Err(RawError::Empty));
        assert_eq!(check_raw(b"GET / HTTP/1.1\r\n"), Err(RawError::NoHeadEnd));
        assert_eq!(check_raw(b"GET /\r\n\r\n"), Err(RawError::RequestLine));
    }
}
