//! The request encoding and response reading with byte tables: each row one rule of RFC 9114
//! (or RFC 9204), fed whole and a byte at a time. The QUIC side is exercised end to end by
//! tests/http3.rs against a quinn-proto server.

use linerate_h3::Code;
use linerate_h3::frame::{self, Frame, FrameReader, Role, kind};
use linerate_h3::qpack::{self, Decoder};

use super::*;

fn section(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut s = Vec::new();
    qpack::encode::prefix(&mut s);
    for (n, v) in fields {
        qpack::encode::field(&mut s, n.as_bytes(), v.as_bytes());
    }
    s
}

fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
    let s = section(fields);
    let mut out = Vec::new();
    frame::write_head(&mut out, kind::HEADERS, s.len() as u64);
    out.extend_from_slice(&s);
    out
}

fn data(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    frame::write_head(&mut out, kind::DATA, body.len() as u64);
    out.extend_from_slice(body);
    out
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

/// Feeds `bytes` whole, or one byte at a time, then ends the stream.
fn read(bytes: &[u8], bytewise: bool) -> Result<(u16, u64), Code> {
    let mut r = Response::new();
    let mut d = Decoder::new(0);
    if bytewise {
        for b in bytes {
            r.feed(std::slice::from_ref(b), &mut d)?;
        }
    } else {
        r.feed(bytes, &mut d)?;
    }
    r.finish()
}

#[test]
fn responses() {
    let ok = || headers(&[(":status", "200")]);
    // A section that refers to the dynamic table: Required Insert Count 1, Base 0, then an
    // indexed dynamic line.
    let mut dynamic = Vec::new();
    frame::write_head(&mut dynamic, kind::HEADERS, 3);
    dynamic.extend_from_slice(&[0x02, 0x00, 0x80]);
    let truncated = {
        let mut d = data(b"hello");
        d.pop();
        cat(&[ok(), d])
    };
    type Row = (&'static str, Vec<u8>, Result<(u16, u64), Code>);
    let rows: Vec<Row> = vec![
        // RFC 9114 §4.1: HEADERS, then DATA; the stream's end ends the response.
        (
            "200 with a body",
            cat(&[ok(), data(b"hello")]),
            Ok((200, 5)),
        ),
        ("200 without a body", ok(), Ok((200, 0))),
        (
            "the body in several DATA frames, an empty one among them",
            cat(&[ok(), data(b"he"), data(b""), data(b"llo")]),
            Ok((200, 5)),
        ),
        (
            "a status outside the static table, and other fields",
            cat(&[
                headers(&[(":status", "418"), ("content-type", "text/plain")]),
                data(b"x"),
            ]),
            Ok((418, 1)),
        ),
        // §4.1: interim responses come before the final one.
        (
            "103 then 200",
            cat(&[headers(&[(":status", "103")]), ok(), data(b"hello")]),
            Ok((200, 5)),
        ),
        // §4.1: trailers follow the body, and are decoded.
        (
            "trailers",
            cat(&[ok(), data(b"hi"), headers(&[("x-checksum", "1")])]),
            Ok((200, 2)),
        ),
        // §9: frames of unknown (here reserved) types are skipped.
        (
            "a reserved frame type is skipped",
            cat(&[ok(), vec![0x21, 0x02, 0xaa, 0xbb], data(b"hello")]),
            Ok((200, 5)),
        ),
        // §4.1.2: a response without a final status is malformed.
        (
            "an interim response only",
            headers(&[(":status", "100")]),
            Err(Code::MessageError),
        ),
        ("no HEADERS at all", Vec::new(), Err(Code::MessageError)),
        // §4.3.2: :status is required, and pseudo-headers come first (§4.3).
        (
            "no :status",
            headers(&[("content-type", "text/plain")]),
            Err(Code::MessageError),
        ),
        (
            ":status after a regular field",
            headers(&[("content-type", "text/plain"), (":status", "200")]),
            Err(Code::MessageError),
        ),
        (
            "a status of two digits",
            headers(&[(":status", "99")]),
            Err(Code::MessageError),
        ),
        // §4.1: DATA before HEADERS, DATA after trailers: H3_FRAME_UNEXPECTED.
        (
            "DATA first",
            cat(&[data(b"x"), ok()]),
            Err(Code::FrameUnexpected),
        ),
        (
            "DATA after trailers",
            cat(&[ok(), headers(&[("x", "1")]), data(b"x")]),
            Err(Code::FrameUnexpected),
        ),
        // §7.2.4: SETTINGS belongs on the control stream.
        (
            "SETTINGS on a request stream",
            cat(&[ok(), vec![0x04, 0x00]]),
            Err(Code::FrameUnexpected),
        ),
        // §7.1: a frame cut by the stream's end.
        ("a frame cut short", truncated, Err(Code::FrameError)),
        // RFC 9204 §2.2.3: the client said it has no dynamic table.
        (
            "a dynamic table reference",
            dynamic,
            Err(Code::QpackDecompressionFailed),
        ),
    ];
    for (name, bytes, want) in rows {
        for bytewise in [false, true] {
            assert_eq!(
                read(&bytes, bytewise),
                want,
                "{name} (bytewise: {bytewise})"
            );
        }
    }
}

/// A field section over `MAX_FIELD_SECTION` is refused without being held.
#[test]
fn a_huge_field_section_is_refused() {
    let mut big = Vec::new();
    frame::write_head(&mut big, kind::HEADERS, MAX_FIELD_SECTION as u64 + 1);
    assert_eq!(read(&big, false), Err(Code::ExcessiveLoad));
}

/// The stream's bytes read back: HEADERS (a static-only section) and DATA.
fn parse(req: &Request) -> (Vec<(String, String)>, Vec<u8>) {
    let mut reader = FrameReader::new(Role::Request, 1 << 16);
    let mut d = Decoder::new(0);
    let mut fields = Vec::new();
    let mut body = Vec::new();
    let mut input = req.bytes();
    while !input.is_empty() {
        let (n, f) = reader.read(input).unwrap();
        input = &input[n..];
        match f {
            Some(Frame::Headers(s)) => {
                let r = d
                    .decode(s, |n, v| {
                        fields.push((
                            String::from_utf8(n.to_vec()).unwrap(),
                            String::from_utf8(v.to_vec()).unwrap(),
                        ))
                    })
                    .unwrap();
                assert_eq!(r.required_insert_count, 0, "static table only");
            }
            Some(Frame::Data(b)) => body.extend_from_slice(b),
            None => {}
            Some(other) => panic!("unexpected {other:?}"),
        }
    }
    assert!(reader.at_boundary());
    (fields, body)
}

fn owned(fields: &[(&str, &str)]) -> Vec<(String, String)> {
    fields
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

#[test]
fn requests() {
    type Row<'a> = (&'a str, Request, Vec<(&'a str, &'a str)>, &'a [u8]);
    let h = |n: &str, v: &str| (n.to_string(), v.to_string());
    let rows: Vec<Row> = vec![
        // RFC 9114 §4.3.1: the four pseudo-headers, in order, before any other field.
        (
            "a GET",
            Request::new("GET", "h:8443", "/", &[], b""),
            vec![
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "h:8443"),
                (":path", "/"),
            ],
            b"",
        ),
        // §4.2: field names are lowercase; §4.3.1: a Host header becomes :authority.
        (
            "headers lowercased, Host as :authority",
            Request::new(
                "GET",
                "h:8443",
                "/q?x=1",
                &[h("Host", "other"), h("X-Trace", "7")],
                b"",
            ),
            vec![
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "other"),
                (":path", "/q?x=1"),
                ("x-trace", "7"),
            ],
            b"",
        ),
        // A body goes in DATA, with content-length added unless given.
        (
            "a POST with a body",
            Request::new("POST", "h", "/echo", &[], b"hello"),
            vec![
                (":method", "POST"),
                (":scheme", "https"),
                (":authority", "h"),
                (":path", "/echo"),
                ("content-length", "5"),
            ],
            b"hello",
        ),
        (
            "a body with its own content-length",
            Request::new("PUT", "h", "/", &[h("Content-Length", "5")], b"hello"),
            vec![
                (":method", "PUT"),
                (":scheme", "https"),
                (":authority", "h"),
                (":path", "/"),
                ("content-length", "5"),
            ],
            b"hello",
        ),
    ];
    for (name, req, fields, body) in rows {
        let (got_fields, got_body) = parse(&req);
        assert_eq!(got_fields, owned(&fields), "{name}");
        assert_eq!(got_body, body, "{name}");
    }
    // The common request is a handful of bytes: HEADERS, 7 bytes of section.
    let get = Request::new("GET", "a", "/", &[], b"");
    assert_eq!(
        get.bytes(),
        [0x01, 0x08, 0x00, 0x00, 0xd1, 0xd7, 0x50, 0x01, b'a', 0xc1]
    );
}

/// A graceful close is H3_NO_ERROR from the peer (or the idle timeout); anything else is not.
#[test]
fn graceful_closes() {
    use quinn_proto::{ApplicationClose, ConnectionError};
    let app = |code: u64| {
        H3Error::Lost(ConnectionError::ApplicationClosed(ApplicationClose {
            error_code: VarInt::from_u64(code).unwrap(),
            reason: Default::default(),
        }))
    };
    assert!(app(Code::NoError.value()).is_graceful());
    assert!(H3Error::Lost(ConnectionError::TimedOut).is_graceful());
    assert!(!app(Code::InternalError.value()).is_graceful());
    assert!(!H3Error::Protocol(Code::FrameError).is_graceful());
    assert!(!H3Error::Lost(ConnectionError::Reset).is_graceful());
}
