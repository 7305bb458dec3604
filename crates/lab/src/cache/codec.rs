//! What both cache protocols' codecs share: the operations the lab sends, the replies it
//! counts, and the refusals of a reply it cannot read.
//!
//! The codecs (`resp`, `meta`) are sans I/O: requests are appended to a caller's buffer, replies
//! are read from the front of one and say how many bytes they took. A reply they cannot read is
//! a [`ProtoError`] (the connection is then closed and counted), never a panic; a value is
//! returned as a span into the caller's buffer, never copied.

use std::fmt;
use std::ops::Range;

/// The longest reply line read before its CRLF (a status, an error, a value's header): a
/// server's error text is short; anything longer is not one of these protocols.
pub const MAX_LINE: usize = 1024;
/// The largest value accepted in a reply (both servers' default item limit is 1 MiB; Redis's
/// strings go to 512 MiB, which the lab never stores).
pub const MAX_VALUE: usize = 16 << 20;

/// A request the lab sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Get,
    Set,
}

/// One reply, framed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A GET that found its key: the value's bytes in the buffer read from.
    Value(Range<usize>),
    /// A GET that did not.
    Miss,
    /// A SET that stored.
    Stored,
    /// A SET the server declined (memcached's `NS`).
    NotStored,
    /// The server's error reply (`-ERR …`, `SERVER_ERROR …`): framed, so the connection goes
    /// on, but the request failed.
    Error(Range<usize>),
}

/// Reading one reply from the front of a buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A whole reply, and the bytes it took.
    Reply(Reply, usize),
    /// Not all of it is here yet.
    Incomplete,
}

/// Why a reply could not be read: the stream is no longer framed, so the connection ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// A line longer than [`MAX_LINE`] without its CRLF.
    LineTooLong,
    /// A value longer than [`MAX_VALUE`].
    ValueTooLarge,
    /// A length that is not a plain decimal (sign, leading zero, other bytes, overflow).
    BadLength,
    /// A value not followed by CRLF, or a line ended by a bare LF.
    BadTerminator,
    /// A reply this protocol does not send to the lab's requests (an integer, an array, an
    /// unknown code).
    Unexpected,
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProtoError::LineTooLong => "a reply line longer than MAX_LINE",
            ProtoError::ValueTooLarge => "a value larger than MAX_VALUE",
            ProtoError::BadLength => "a malformed length",
            ProtoError::BadTerminator => "a value or line not ended by CRLF",
            ProtoError::Unexpected => "a reply the lab's requests do not call for",
        })
    }
}

impl std::error::Error for ProtoError {}

/// The line at the front of `buf` without its CRLF, and the bytes it takes with it; `None`
/// until the CRLF is here.
pub fn line(buf: &[u8]) -> Result<Option<(&[u8], usize)>, ProtoError> {
    let window = &buf[..buf.len().min(MAX_LINE + 2)];
    match memchr::memchr(b'\n', window) {
        Some(0) => Err(ProtoError::BadTerminator),
        Some(i) if window[i - 1] == b'\r' => Ok(Some((&buf[..i - 1], i + 1))),
        Some(_) => Err(ProtoError::BadTerminator),
        None if window.len() > MAX_LINE + 1 => Err(ProtoError::LineTooLong),
        None => Ok(None),
    }
}

/// A length as both servers write it: ASCII digits, no sign, no leading zero, at most
/// [`MAX_VALUE`].
pub fn length(digits: &[u8]) -> Result<usize, ProtoError> {
    if digits.is_empty()
        || !digits.iter().all(u8::is_ascii_digit)
        || (digits.len() > 1 && digits[0] == b'0')
        || digits.len() > 9
    {
        return Err(ProtoError::BadLength);
    }
    let n = digits
        .iter()
        .fold(0usize, |n, d| n * 10 + usize::from(d - b'0'));
    if n > MAX_VALUE {
        return Err(ProtoError::ValueTooLarge);
    }
    Ok(n)
}

/// `n` value bytes starting at `at`, then CRLF: the value's span and the end of the CRLF, or
/// `None` until all of it is here.
pub fn value(buf: &[u8], at: usize, n: usize) -> Result<Option<(Range<usize>, usize)>, ProtoError> {
    let end = at + n;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if &buf[end..end + 2] != b"\r\n" {
        return Err(ProtoError::BadTerminator);
    }
    Ok(Some((at..end, end + 2)))
}

/// Appends `n` in decimal.
pub fn push_decimal(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_need_crlf() {
        assert_eq!(line(b"+OK\r\nrest"), Ok(Some((&b"+OK"[..], 5))));
        assert_eq!(line(b"+OK\r"), Ok(None));
        assert_eq!(line(b""), Ok(None));
        assert_eq!(line(b"+OK\n"), Err(ProtoError::BadTerminator));
        assert_eq!(line(b"\n"), Err(ProtoError::BadTerminator));
        let long = vec![b'a'; MAX_LINE + 2];
        assert_eq!(line(&long), Err(ProtoError::LineTooLong));
        let mut fits = vec![b'a'; MAX_LINE];
        fits.extend_from_slice(b"\r\n");
        assert_eq!(line(&fits).unwrap().unwrap().1, MAX_LINE + 2);
    }

    #[test]
    fn lengths_are_plain_decimals() {
        for (text, want) in [
            (&b"0"[..], Ok(0)),
            (b"100", Ok(100)),
            (b"65536", Ok(65536)),
            (b"", Err(ProtoError::BadLength)),
            (b"-1", Err(ProtoError::BadLength)),
            (b"+5", Err(ProtoError::BadLength)),
            (b"007", Err(ProtoError::BadLength)),
            (b"1 ", Err(ProtoError::BadLength)),
            (b"99999999999999999999", Err(ProtoError::BadLength)),
            (b"999999999", Err(ProtoError::ValueTooLarge)),
        ] {
            assert_eq!(length(text), want, "{:?}", String::from_utf8_lossy(text));
        }
    }

    #[test]
    fn values_end_in_crlf() {
        assert_eq!(value(b"xxabc\r\n", 2, 3), Ok(Some((2..5, 7))));
        assert_eq!(value(b"xxabc\r", 2, 3), Ok(None));
        assert_eq!(value(b"xxabcd\r\n", 2, 3), Err(ProtoError::BadTerminator));
    }
}
