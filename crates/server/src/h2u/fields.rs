//! The header blocks of an upstream HTTP/2 exchange: a request's pseudo-headers and fields
//! HPACK-encoded (names lowercased, connection-specific fields left out), and a response's
//! fields checked as strictly as the server checks requests (RFC 9113 §8.2, §8.3.2).
//!
//! Owns what makes a response head or trailer block malformed, and the decoded fields handed
//! to the caller. Nothing here sees frames; the HPACK tables are the connection's.
#![forbid(unsafe_code)]

use crate::h2::answer_fields;
use crate::h2::fields::{Malformed as FieldError, check_regular, parse_length};
use linerate_hpack as hpack;

/// A request as the caller gives it: the four pseudo-headers (RFC 9113 §8.3.1) and the
/// fields, any case (they go out lowercase; connection-specific ones, `host` and a `te` other
/// than `trailers` are left out).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Request<'a> {
    pub method: &'a [u8],
    pub scheme: &'a [u8],
    pub authority: &'a [u8],
    pub path: &'a [u8],
    pub fields: &'a [(&'a [u8], &'a [u8])],
}

/// Why a response's header block is malformed (RFC 9113 §8.1.1): the stream is reset with
/// PROTOCOL_ERROR and the exchange fails (a 502 if nothing was forwarded yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Malformed {
    /// A field breaks §8.2 (uppercase or invalid name, invalid value, connection-specific).
    Field(FieldError),
    /// A pseudo-header other than `:status`, a second `:status`, one after a regular field,
    /// or one in trailers (§8.3, §8.1).
    PseudoHeader,
    /// No `:status` in a response head (§8.3.2).
    NoStatus,
    /// `:status` is not three digits, or is 101 (§8.6: no Upgrade in HTTP/2).
    Status,
    /// Two Content-Length values, or one that is not digits (RFC 9110 §8.6).
    ContentLength,
    /// The DATA do not add up to Content-Length (§8.1.1).
    LengthMismatch,
    /// DATA before the response head, or on a response that has no content (HEAD, 204, 304).
    UnexpectedData,
    /// A second HEADERS without END_STREAM (trailers end the stream, §8.1), or an informational
    /// (1xx) head with END_STREAM.
    HeadersOrder,
    /// Longer than the SETTINGS_MAX_HEADER_LIST_SIZE we announced (§6.5.2, §10.5.1).
    TooLarge,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Field(e) => write!(f, "a bad field ({e:?})"),
            Malformed::PseudoHeader => f.write_str("a pseudo-header out of place"),
            Malformed::NoStatus => f.write_str("no :status"),
            Malformed::Status => f.write_str("a bad :status"),
            Malformed::ContentLength => f.write_str("a bad content-length"),
            Malformed::LengthMismatch => f.write_str("DATA not matching content-length"),
            Malformed::UnexpectedData => f.write_str("DATA where no content may be"),
            Malformed::HeadersOrder => f.write_str("HEADERS out of order"),
            Malformed::TooLarge => f.write_str("a header list over the limit"),
        }
    }
}

/// A decoded response head or trailer block's regular fields, in order (names lowercase, as
/// the wire has them). Reused from block to block.
#[derive(Default, Debug)]
pub(crate) struct Fields {
    buf: Vec<u8>,
    /// Each field's name end and value end in `buf` (the name starts where the last ended).
    ends: Vec<(u32, u32)>,
}

impl Fields {
    fn clear(&mut self) {
        self.buf.clear();
        self.ends.clear();
    }

    fn push(&mut self, name: &[u8], value: &[u8]) {
        self.buf.extend_from_slice(name);
        let n = self.buf.len() as u32;
        self.buf.extend_from_slice(value);
        self.ends.push((n, self.buf.len() as u32));
    }

    /// Each field's name and value.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut start = 0usize;
        self.ends.iter().map(move |&(n, v)| {
            let (n, v) = (n as usize, v as usize);
            let field = (&self.buf[start..n], &self.buf[n..v]);
            start = v;
            field
        })
    }

    /// The first value of `name` (lowercase).
    pub(crate) fn get(&self, name: &[u8]) -> Option<&[u8]> {
        self.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }
}

/// Collects one response head's or trailer block's fields, checking each.
pub(crate) struct ResponseFields<'a> {
    out: &'a mut Fields,
    trailers: bool,
    status: Option<u16>,
    regular: bool,
    /// The header list size so far (§6.5.2: names, values and 32 per field).
    size: usize,
    limit: usize,
    content_length: Option<u64>,
    error: Option<Malformed>,
}

/// A checked block: the status (0 for trailers) and Content-Length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Checked {
    pub status: u16,
    pub content_length: Option<u64>,
}

impl<'a> ResponseFields<'a> {
    /// Fields of a head (`trailers` false) or a trailer block, into `out`; `limit` is the
    /// header list size we announced.
    pub(crate) fn new(out: &'a mut Fields, trailers: bool, limit: usize) -> ResponseFields<'a> {
        out.clear();
        ResponseFields {
            out,
            trailers,
            status: None,
            regular: false,
            size: 0,
            limit,
            content_length: None,
            error: None,
        }
    }

    fn fail(&mut self, why: Malformed) {
        if self.error.is_none() {
            self.error = Some(why);
        }
    }

    /// One decoded field. Once the block is over the limit nothing more is kept, so a block of
    /// indexed references to a large table entry costs only the counting.
    pub(crate) fn field(&mut self, name: &[u8], value: &[u8]) {
        self.size += name.len() + value.len() + 32;
        if self.size > self.limit {
            self.fail(Malformed::TooLarge);
        }
        if self.error.is_some() {
            return;
        }
        if name.first() == Some(&b':') {
            if self.trailers || self.regular || self.status.is_some() || name != b":status" {
                return self.fail(Malformed::PseudoHeader);
            }
            match parse_status(value) {
                Some(s) => self.status = Some(s),
                None => self.fail(Malformed::Status),
            }
            return;
        }
        self.regular = true;
        if let Err(e) = check_regular(name, value) {
            return self.fail(Malformed::Field(e));
        }
        if name == b"content-length" && !self.trailers {
            match parse_length(value) {
                Some(n) if self.content_length.is_none_or(|c| c == n) => {
                    self.content_length = Some(n)
                }
                _ => return self.fail(Malformed::ContentLength),
            }
        }
        self.out.push(name, value);
    }

    pub(crate) fn finish(self) -> Result<Checked, Malformed> {
        if let Some(e) = self.error {
            return Err(e);
        }
        let status = match (self.trailers, self.status) {
            (true, _) => 0,
            (false, Some(s)) => s,
            (false, None) => return Err(Malformed::NoStatus),
        };
        Ok(Checked {
            status,
            content_length: self.content_length,
        })
    }
}

/// Three digits, 100 to 999, and not 101 (RFC 9113 §8.6).
fn parse_status(v: &[u8]) -> Option<u16> {
    let [a, b, c] = v else {
        return None;
    };
    if !(b'1'..=b'9').contains(a) || !b.is_ascii_digit() || !c.is_ascii_digit() {
        return None;
    }
    let s = u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0');
    (s != 101).then_some(s)
}

/// Writes `req`'s header block into `out` (cleared first), preceded by a dynamic table size
/// update to 0 when `table_update` (RFC 7541 §4.2: the peer changed
/// SETTINGS_HEADER_TABLE_SIZE; the encoder never indexes, so 0 is always within it). Returns
/// the header list size (§6.5.2).
pub(crate) fn encode_request(out: &mut Vec<u8>, req: &Request<'_>, table_update: bool) -> usize {
    out.clear();
    if table_update {
        hpack::integer(out, 0x20, 5, 0);
    }
    let mut size = 0;
    for (name, value) in [
        (&b":method"[..], req.method),
        (b":scheme", req.scheme),
        (b":authority", req.authority),
        (b":path", req.path),
    ] {
        hpack::field(out, name, value);
        size += name.len() + value.len() + 32;
    }
    let fields = req.fields.iter().map(|&(n, v)| (n, v));
    answer_fields::each(fields, false, |name, value| {
        // §8.3.1: `:authority` carries the host; §8.2.2: `te` only as `trailers`; §8.3: the
        // pseudo-headers are the four above.
        if name == b"host"
            || name.first() == Some(&b':')
            || (name == b"te" && !value.eq_ignore_ascii_case(b"trailers"))
        {
            return;
        }
        hpack::field(out, name, value);
        size += name.len() + value.len() + 32;
    });
    size
}

/// Writes a trailer block (fields only) into `out` (cleared first), as [`encode_request`].
pub(crate) fn encode_trailers(
    out: &mut Vec<u8>,
    fields: &[(&[u8], &[u8])],
    table_update: bool,
) -> usize {
    out.clear();
    if table_update {
        hpack::integer(out, 0x20, 5, 0);
    }
    let mut size = 0;
    answer_fields::each(fields.iter().map(|&(n, v)| (n, v)), false, |name, value| {
        if name == b"te" || name == b"host" || name.first() == Some(&b':') {
            return;
        }
        hpack::field(out, name, value);
        size += name.len() + value.len() + 32;
    });
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `fields` as a head (or trailers) through [`ResponseFields`].
    fn check(fields: &[(&str, &str)], trailers: bool, limit: usize) -> Result<Checked, Malformed> {
        let mut out = Fields::default();
        let mut r = ResponseFields::new(&mut out, trailers, limit);
        for (n, v) in fields {
            r.field(n.as_bytes(), v.as_bytes());
        }
        r.finish()
    }

    /// One row per rule: (rule, fields, trailers, verdict).
    #[test]
    fn response_blocks_are_checked() {
        use FieldError as F;
        let ok = |status, content_length| {
            Ok(Checked {
                status,
                content_length,
            })
        };
        type Row<'a> = (
            &'a str,
            &'a [(&'a str, &'a str)],
            bool,
            Result<Checked, Malformed>,
        );
        #[rustfmt::skip]
        let rows: &[Row] = &[
            ("a plain head", &[(":status", "200"), ("content-type", "text/plain")], false, ok(200, None)),
            ("content-length read", &[(":status", "200"), ("content-length", "5")], false, ok(200, Some(5))),
            ("the same length twice is one (RFC 9110 §8.6)", &[(":status", "200"), ("content-length", "5"), ("content-length", "5")], false, ok(200, Some(5))),
            ("two lengths (RFC 9110 §8.6)", &[(":status", "200"), ("content-length", "5"), ("content-length", "6")], false, Err(Malformed::ContentLength)),
            ("a length not digits", &[(":status", "200"), ("content-length", "+5")], false, Err(Malformed::ContentLength)),
            ("1xx is a head (§8.1)", &[(":status", "103"), ("link", "</a>")], false, ok(103, None)),
            ("no :status (§8.3.2)", &[("content-type", "x")], false, Err(Malformed::NoStatus)),
            ("two :status (§8.3)", &[(":status", "200"), (":status", "200")], false, Err(Malformed::PseudoHeader)),
            ("a request pseudo-header (§8.3)", &[(":status", "200"), (":path", "/")], false, Err(Malformed::PseudoHeader)),
            ("a pseudo-header after a field (§8.3)", &[("x", "1"), (":status", "200")], false, Err(Malformed::PseudoHeader)),
            ("status not three digits", &[(":status", "20")], false, Err(Malformed::Status)),
            ("status with a letter", &[(":status", "2x0")], false, Err(Malformed::Status)),
            ("status 099", &[(":status", "099")], false, Err(Malformed::Status)),
            ("101 (§8.6)", &[(":status", "101")], false, Err(Malformed::Status)),
            ("uppercase name (§8.2.1)", &[(":status", "200"), ("X-A", "1")], false, Err(Malformed::Field(F::UppercaseName))),
            ("a name with a space (§8.2.1)", &[(":status", "200"), ("x a", "1")], false, Err(Malformed::Field(F::InvalidName))),
            ("a value with CR (§8.2.1)", &[(":status", "200"), ("x", "a\rb")], false, Err(Malformed::Field(F::InvalidValue))),
            ("connection-specific (§8.2.2)", &[(":status", "200"), ("connection", "close")], false, Err(Malformed::Field(F::ConnectionSpecific))),
            ("transfer-encoding (§8.2.2)", &[(":status", "200"), ("transfer-encoding", "chunked")], false, Err(Malformed::Field(F::ConnectionSpecific))),
            ("te in a response (§8.2.2)", &[(":status", "200"), ("te", "trailers")], false, Err(Malformed::Field(F::ConnectionSpecific))),
            ("trailers", &[("grpc-status", "0"), ("grpc-message", "")], true, ok(0, None)),
            ("a pseudo-header in trailers (§8.1)", &[(":status", "200")], true, Err(Malformed::PseudoHeader)),
            ("over the list limit (§10.5.1)", &[(":status", "200"), ("x", &"v".repeat(100))], false, Err(Malformed::TooLarge)),
        ];
        for (rule, fields, trailers, want) in rows {
            assert_eq!(check(fields, *trailers, 150), *want, "{rule}");
        }
    }

    #[test]
    fn fields_kept_in_order() {
        let mut out = Fields::default();
        let mut r = ResponseFields::new(&mut out, false, 1000);
        for (n, v) in [(":status", "200"), ("a", "1"), ("b", ""), ("a", "2")] {
            r.field(n.as_bytes(), v.as_bytes());
        }
        r.finish().unwrap();
        let got: Vec<(&[u8], &[u8])> = out.iter().collect();
        assert_eq!(got, [(&b"a"[..], &b"1"[..]), (b"b", b""), (b"a", b"2")]);
        assert_eq!(out.get(b"a"), Some(&b"1"[..]));
        assert_eq!(out.len(), 3);
    }

    /// RFC 9113 §8.2.1 (lowercase), §8.2.2 (no connection-specific field, `te: trailers`
    /// only), §8.3.1 (`host` is `:authority`); RFC 7541 §4.2 (size update first).
    #[test]
    fn a_request_encodes_lowercase_without_connection_fields() {
        let fields: &[(&[u8], &[u8])] = &[
            (b"Content-Type", b"application/grpc"),
            (b"TE", b"trailers"),
            (b"Connection", b"keep-alive"),
            (b"Host", b"other"),
            (b":protocol", b"websocket"),
            (b"X-Id", b"7"),
        ];
        let req = Request {
            method: b"POST",
            scheme: b"http",
            authority: b"up:50051",
            path: b"/s/M",
            fields,
        };
        let mut block = Vec::new();
        let size = encode_request(&mut block, &req, true);
        assert_eq!(block[0], 0x20, "a size update to 0 comes first");
        let mut got = Vec::new();
        hpack::Decoder::new()
            .decode(&block, |n, v| {
                got.push(format!(
                    "{}: {}",
                    String::from_utf8_lossy(n),
                    String::from_utf8_lossy(v)
                ))
            })
            .unwrap();
        assert_eq!(
            got,
            [
                ":method: POST",
                ":scheme: http",
                ":authority: up:50051",
                ":path: /s/M",
                "content-type: application/grpc",
                "te: trailers",
                "x-id: 7"
            ]
        );
        let want: usize = got.iter().map(|l| l.len() - 2 + 32).sum();
        assert_eq!(size, want);
    }
}
