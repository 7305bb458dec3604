//! Table-driven protocol tests: one row per rule, with the rule cited.
//!
//! Each row is a raw request and the expected outcome. Every accepted row is also fed one
//! byte at a time through the parser to prove the result does not depend on how bytes arrive.
#![forbid(unsafe_code)]

use crate::{BodyDecoder, Framing, Limits, Method, ParseError, Parsed, RequestHead, Version};

use ParseError::*;

/// Expected outcome of parsing a head.
#[derive(Debug)]
enum Want {
    /// Complete, with this framing.
    Ok(Framing),
    /// Rejected with this error.
    Err(ParseError),
}

fn parse(buf: &[u8]) -> Result<Parsed, ParseError> {
    RequestHead::new().parse(buf, &Limits::default())
}

#[rustfmt::skip]
const HEAD_RULES: &[(&str, &[u8], Want)] = &[
    // RFC 9112 §3: request line.
    ("simple GET", b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("HTTP/1.0 needs no Host (RFC 9112 §3.2)", b"GET / HTTP/1.0\r\n\r\n", Want::Ok(Framing::None)),
    ("empty method (§3.1)", b" / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidMethod)),
    ("method with bad byte (§3.1 token)", b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidMethod)),
    ("two spaces after method (§3)", b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("target with space (§3.2)", b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidVersion)),
    ("target with control (§3.2)", b"GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("target with DEL (§3.2)", b"GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("target with non-ASCII (RFC 3986)", b"GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("target with fragment (RFC 3986)", b"GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("bad pct-encoding (RFC 3986 §2.1)", b"GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("truncated pct-encoding (RFC 3986 §2.1)", b"GET /a% HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("%00 in the path", b"GET /a%00b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(EncodedControlInPath)),
    ("%0d%0a in the path", b"GET /a%0d%0aSet-Cookie:x HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(EncodedControlInPath)),
    ("%0A in the path (either case)", b"GET /a%0A HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(EncodedControlInPath)),
    ("%0D in an absolute-form path", b"GET http://a/x%0D HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(EncodedControlInPath)),
    ("%0a in the query is the application's", b"GET /a?q=%0a%00 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    // WHATWG URL §1.3 (percent-encode sets): what browsers send unencoded is accepted, as
    // nginx, h2o and caddy accept it (Chromium's `?filter=a|b` once got 400).
    ("`|` in the query (browsers send it raw)", b"GET /index.html?filter=a|b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`^` in the query", b"GET /?q=a^b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`{` and `}` in the query", b"GET /?q={x} HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("backquote in the query", b"GET /?q=`x` HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("a stray `%` in the query is the application's", b"GET /?d=100% HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`%zz` in the query", b"GET /?d=%zz&e=% HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`\\` in the query (browsers send it raw)", b"GET /?p=a\\b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`|`, `^`, `{`, `}`, backquote in the path", b"GET /a|b^c{d}`e HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`|` in an absolute-form query", b"GET http://a/x?y=1|2 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("`|` in an absolute-form authority (RFC 9110 §7.2: a host)", b"GET http://a|b/x HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`{` in an absolute-form authority", b"GET http://{a}:80/ HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`\\` in the path (browsers send `/`)", b"GET /a\\b HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`\\` in the path before a query", b"GET /a\\b?c HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`\"` in the query (browsers encode it)", b"GET /?q=\"x\" HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`<` in the path (browsers encode it)", b"GET /<x> HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("`>` in the query", b"GET /?q=> HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("a control in the query", b"GET /?q=\x01 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("non-ASCII in the query", b"GET /?q=\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("a stray `%` in the path", b"GET /100%/x?q HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("%01 and %0b in the path are not refused", b"GET /a%01%0b%20 HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("method of 32 bytes: a token (501 later)", b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEF / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("method over 32 bytes (§3 SHOULD 501)", b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(MethodTooLong)),
    ("method over 32 bytes, unfinished", b"ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH", Want::Err(MethodTooLong)),
    ("no version: HTTP/0.9 (§3)", b"GET /\r\nHost: a\r\n\r\n", Want::Err(InvalidVersion)),
    ("lowercase version (§2.3 case-sensitive)", b"GET / http/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidVersion)),
    ("two-digit minor (§2.3)", b"GET / HTTP/1.10\r\nHost: a\r\n\r\n", Want::Err(InvalidVersion)),
    ("trailing space after version (§3)", b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", Want::Err(InvalidVersion)),
    ("HTTP/2.0 on h1 (RFC 9110 §6.2) → 505", b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Want::Err(VersionNotSupported)),
    ("HTTP/0.9 version → 505", b"GET / HTTP/0.9\r\nHost: a\r\n\r\n", Want::Err(VersionNotSupported)),
    ("HTTP/1.9 is handled as 1.1 (RFC 9110 §6.2)", b"GET / HTTP/1.9\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("absolute-form accepted (§3.2.2)", b"GET http://a.example/x?y HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("absolute-form other scheme", b"GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("absolute-form with userinfo (RFC 9110 §4.2.4)", b"GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("asterisk-form only for OPTIONS (§3.2.4)", b"GET * HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("asterisk-form with OPTIONS (§3.2.4)", b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("one leading empty line (§2.2)", b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Ok(Framing::None)),
    ("two leading empty lines", b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidMethod)),
    // RFC 9112 §2.2: line endings.
    ("bare LF ends request line (§2.2, strict)", b"GET / HTTP/1.1\nHost: a\r\n\r\n", Want::Err(BareLf)),
    ("bare LF ends a field line", b"GET / HTTP/1.1\r\nHost: a\n\r\n", Want::Err(BareLf)),
    ("bare LF ends the head", b"GET / HTTP/1.1\r\nHost: a\r\n\n", Want::Err(BareLf)),
    ("leading bare LF", b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(BareLf)),
    ("bare CR in request line (§2.2)", b"GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", Want::Err(InvalidTarget)),
    ("bare CR in field value (§2.2)", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", Want::Err(InvalidHeaderValue)),
    ("bare CR in field name", b"GET / HTTP/1.1\r\nHost: a\r\nX\r: a\r\n\r\n", Want::Err(InvalidHeaderName)),
    // RFC 9112 §5 and RFC 9110 §5: fields.
    ("NUL in field value (RFC 9110 §5.5)", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", Want::Err(InvalidHeaderValue)),
    ("control in field value (RFC 9110 §5.5)", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x1bb\r\n\r\n", Want::Err(InvalidHeaderValue)),
    ("DEL in field value", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n", Want::Err(InvalidHeaderValue)),
    ("HTAB and obs-text in value are fine (RFC 9110 §5.5)", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\xff\r\n\r\n", Want::Ok(Framing::None)),
    ("space before colon (§5.1 MUST 400)", b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", Want::Err(WhitespaceBeforeColon)),
    ("tab before colon (§5.1)", b"GET / HTTP/1.1\r\nHost\t: a\r\n\r\n", Want::Err(WhitespaceBeforeColon)),
    ("obs-fold (§5.2)", b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", Want::Err(ObsFold)),
    ("empty field name (RFC 9110 §5.1)", b"GET / HTTP/1.1\r\nHost: a\r\n: a\r\n\r\n", Want::Err(InvalidHeaderName)),
    ("field line without colon", b"GET / HTTP/1.1\r\nHost: a\r\nX\r\n\r\n", Want::Err(InvalidHeaderName)),
    ("empty field value is allowed", b"GET / HTTP/1.1\r\nHost: a\r\nX:\r\n\r\n", Want::Ok(Framing::None)),
    // RFC 9112 §3.2: Host.
    ("missing Host on 1.1 (§3.2)", b"GET / HTTP/1.1\r\n\r\n", Want::Err(MissingHost)),
    ("duplicate Host (§3.2)", b"GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", Want::Err(DuplicateHost)),
    ("Host with space inside (§3.2)", b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", Want::Err(InvalidHost)),
    ("Host with slash (§3.2)", b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", Want::Err(InvalidHost)),
    ("Host with port and IPv6", b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", Want::Ok(Framing::None)),
    // RFC 9112 §3.3: an empty Host leaves the target URI without an authority, which http(s)
    // requires; the server "can reject the request" — it does, as nginx does (was accepted).
    ("empty Host is refused (RFC 9112 §3.3)", b"GET / HTTP/1.1\r\nHost:\r\n\r\n", Want::Err(InvalidHost)),
    ("empty Host with OWS is refused", b"GET / HTTP/1.1\r\nHost: \r\n\r\n", Want::Err(InvalidHost)),
    // RFC 9112 §6.3: Content-Length.
    ("Content-Length", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n", Want::Ok(Framing::Length(5))),
    ("Content-Length: 0 means no body", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", Want::Ok(Framing::None)),
    ("Content-Length leading zeros are digits", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 007\r\n\r\n", Want::Ok(Framing::Length(7))),
    ("Content-Length identical list (§6.3 item 5)", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", Want::Ok(Framing::Length(5))),
    ("Content-Length identical repeated lines", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", Want::Ok(Framing::Length(5))),
    ("Content-Length differing list (§6.3)", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length differing lines (§6.3)", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length +5 (1*DIGIT)", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length -1", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length 0x5", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length 5 5", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length empty", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length overflow", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n", Want::Err(InvalidContentLength)),
    ("Content-Length empty list member", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n", Want::Err(InvalidContentLength)),
    // RFC 9112 §6.1 and §6.3: Transfer-Encoding.
    ("chunked", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n", Want::Ok(Framing::Chunked)),
    ("chunked, case-insensitive (§7)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ChUnKeD\r\n\r\n", Want::Ok(Framing::Chunked)),
    ("CL and TE together (§6.1, §6.3 item 3)", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", Want::Err(ContentLengthWithTransferEncoding)),
    ("TE and CL together, other order", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", Want::Err(ContentLengthWithTransferEncoding)),
    ("TE on HTTP/1.0 (§6.1)", b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Want::Err(TransferEncodingOnHttp10)),
    ("chunked not final (§6.3 item 4)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", Want::Err(ChunkedNotFinal)),
    ("only an unknown coding: chunked not final", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", Want::Err(ChunkedNotFinal)),
    ("chunked twice (§7)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", Want::Err(ChunkedNotFinal)),
    ("chunked twice over two lines", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Want::Err(ChunkedNotFinal)),
    ("unknown coding before chunked → 501 (§6.1)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Want::Err(UnsupportedTransferCoding)),
    ("empty TE", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", Want::Err(InvalidTransferEncoding)),
    ("TE with junk", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", Want::Err(InvalidTransferEncoding)),
    ("TE empty list elements ignored (RFC 9110 §5.6.1)", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked\r\n\r\n", Want::Ok(Framing::Chunked)),
    // RFC 9110 §10.1.1: Expect.
    ("Expect: 100-continue", b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n", Want::Ok(Framing::Length(1))),
    ("unknown expectation → 417", b"POST / HTTP/1.1\r\nHost: a\r\nExpect: tea\r\n\r\n", Want::Err(UnsupportedExpectation)),
];

#[test]
fn head_rules_table() {
    for (name, input, want) in HEAD_RULES {
        let got = parse(input);
        let mut head = RequestHead::new();
        match want {
            Want::Ok(framing) => {
                assert_eq!(got, Ok(Parsed::Complete(input.len())), "{name}");
                head.parse(input, &Limits::default()).unwrap();
                assert_eq!(head.framing(), *framing, "{name}");
            }
            Want::Err(e) => assert_eq!(got, Err(*e), "{name}"),
        }
    }
}

#[test]
fn head_rules_hold_for_every_prefix() {
    // A prefix is either Partial or the same error as the whole; never a different verdict.
    for (name, input, want) in HEAD_RULES {
        for cut in 0..input.len() {
            match parse(&input[..cut]) {
                Ok(Parsed::Partial) => {}
                Err(e) => assert!(
                    matches!(want, Want::Err(w) if *w == e),
                    "{name} cut at {cut}: {e:?}"
                ),
                Ok(Parsed::Complete(_)) => panic!("{name}: complete at prefix {cut}"),
            }
        }
    }
}

/// The parser runs its class scans sixteen bytes at a time where the CPU allows; the bytewise
/// parser is the reference. Every row, every prefix, and every row with its bytes shifted
/// behind a padding field (so each scan starts at every offset of a vector) get the same verdict
/// and the same spans from both.
#[test]
fn vector_and_bytewise_parsers_agree() {
    let limits = Limits::default();
    let facts = |h: &RequestHead, buf: &[u8]| {
        (
            h.method(),
            h.target(buf).to_string(),
            h.path(buf).to_string(),
            h.query(buf).map(str::to_string),
            h.host(buf).map(<[u8]>::to_vec),
            h.framing(),
            h.keep_alive(),
            h.headers(buf)
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect::<Vec<_>>(),
        )
    };
    for (name, input, _) in HEAD_RULES {
        let mut shifted = Vec::new();
        for pad in 0..17 {
            // A field line `X-Pad: aaa` after the request line moves every later field.
            let Some(eol) = input.windows(2).position(|w| w == b"\r\n") else {
                continue;
            };
            let mut v = input[..eol + 2].to_vec();
            v.extend_from_slice(b"X-Pad: ");
            v.extend(std::iter::repeat_n(b'a', pad));
            v.extend_from_slice(b"\r\n");
            v.extend_from_slice(&input[eol + 2..]);
            shifted.push(v);
        }
        // Each row with one byte replaced, at every position, by bytes from a fixed xorshift
        // sequence: the verdicts on near-valid input are where the two scans could part.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut mutated = Vec::new();
        for at in 0..input.len() {
            for _ in 0..8 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut v = input.to_vec();
                v[at] = x as u8;
                mutated.push(v);
            }
        }
        for buf in &mutated {
            let (mut vector, mut bytewise) = (RequestHead::new(), RequestHead::bytewise());
            let got = vector.parse(buf, &limits);
            assert_eq!(got, bytewise.parse(buf, &limits), "{name} mutated {buf:?}");
            if let Ok(Parsed::Complete(_)) = got {
                assert_eq!(facts(&vector, buf), facts(&bytewise, buf), "{name} {buf:?}");
            }
        }
        for buf in std::iter::once(input.to_vec()).chain(shifted) {
            for cut in 0..=buf.len() {
                let b = &buf[..cut];
                let (mut vector, mut bytewise) = (RequestHead::new(), RequestHead::bytewise());
                let got = vector.parse(b, &limits);
                assert_eq!(got, bytewise.parse(b, &limits), "{name} cut {cut}");
                if let Ok(Parsed::Complete(_)) = got {
                    assert_eq!(facts(&vector, b), facts(&bytewise, b), "{name} cut {cut}");
                }
            }
        }
    }
}

#[test]
fn error_statuses_map_to_the_wire() {
    assert_eq!(VersionNotSupported.status(), 505);
    assert_eq!(UnsupportedTransferCoding.status(), 501);
    assert_eq!(UriTooLong.status(), 414);
    assert_eq!(MethodTooLong.status(), 501);
    assert_eq!(EncodedControlInPath.status(), 400);
    assert_eq!(HeadersTooLarge.status(), 431);
    assert_eq!(TooManyHeaders.status(), 431);
    assert_eq!(UnsupportedExpectation.status(), 417);
    assert_eq!(ContentLengthWithTransferEncoding.status(), 400);
    assert!(BareLf.closes());
}

#[test]
fn every_error_kind_has_its_place_and_a_unique_name() {
    let mut names = std::collections::HashSet::new();
    for (i, e) in ParseError::ALL.iter().enumerate() {
        assert_eq!(e.index(), i, "{e:?} out of order in ALL");
        assert!(names.insert(e.name()), "{} named twice", e.name());
        assert!(
            e.name()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        );
    }
    assert_eq!(ObsFold.name(), "obs_fold");
    assert_eq!(
        ContentLengthWithTransferEncoding.name(),
        "content_length_with_transfer_encoding"
    );
}

#[test]
fn accessors_give_spans_of_the_buffer() {
    let buf = b"GET /json/5?m=3&x=%20 HTTP/1.1\r\nHost: h\r\nX-A:  v v \t\r\nConnection: close\r\n\r\nrest";
    let mut h = RequestHead::new();
    assert_eq!(
        h.parse(buf, &Limits::default()),
        Ok(Parsed::Complete(buf.len() - 4))
    );
    assert_eq!(h.method(), Method::Get);
    assert_eq!(h.path(buf), "/json/5");
    assert_eq!(h.query(buf), Some("m=3&x=%20"));
    assert_eq!(h.header(buf, "x-a"), Some(&b"v v"[..]));
    assert_eq!(h.host(buf), Some(&b"h"[..]));
    assert!(!h.keep_alive());
    assert_eq!(h.version(), Version::Http11);
    assert_eq!(h.header_count(), 3);
}

#[test]
fn absolute_form_yields_path_and_query() {
    let buf = b"GET http://example.com:8080?q=1 HTTP/1.1\r\nHost: other\r\n\r\n";
    let mut h = RequestHead::new();
    h.parse(buf, &Limits::default()).unwrap();
    assert_eq!(h.path(buf), "/");
    assert_eq!(h.query(buf), Some("q=1"));
}

#[test]
fn keep_alive_defaults_per_version() {
    // RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive".
    let cases: &[(&[u8], bool)] = &[
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Close\r\n\r\n",
            false,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", false),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", true),
        (
            b"GET / HTTP/1.0\r\nConnection: foo, Keep-Alive\r\n\r\n",
            true,
        ),
        // RFC 9110 §9.3.6: bytes after a CONNECT may be the tunnel's, never a request.
        (
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
            false,
        ),
        (
            b"CONNECT example.com:443 HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n",
            false,
        ),
    ];
    for (buf, ka) in cases {
        let mut h = RequestHead::new();
        h.parse(buf, &Limits::default()).unwrap();
        assert_eq!(h.keep_alive(), *ka, "{}", String::from_utf8_lossy(buf));
    }
}

#[test]
fn expect_is_ignored_on_http10() {
    let buf = b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n";
    let mut h = RequestHead::new();
    h.parse(buf, &Limits::default()).unwrap();
    assert!(!h.expect_continue());
}

#[test]
fn limits_give_414_431() {
    let limits = Limits {
        max_head_bytes: 64,
        max_headers: 2,
        ..Limits::default()
    };
    let mut h = RequestHead::new();
    let long_line = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(80));
    assert_eq!(h.parse(long_line.as_bytes(), &limits), Err(UriTooLong));
    // Unterminated long line: 414 as soon as it passes the limit.
    assert_eq!(
        h.parse(&long_line.as_bytes()[..70], &limits),
        Err(UriTooLong)
    );
    let big_head = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(60));
    assert_eq!(h.parse(big_head.as_bytes(), &limits), Err(HeadersTooLarge));
    let many = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n";
    assert_eq!(h.parse(many, &limits), Err(TooManyHeaders));
    let fits = b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n\r\n";
    assert_eq!(h.parse(fits, &limits), Ok(Parsed::Complete(fits.len())));
}

#[test]
fn bare_lf_past_the_limit_is_a_limit_error_like_its_prefixes() {
    // Found by fuzzing: the verdict must not depend on bytes beyond the head limit.
    let limits = Limits {
        max_head_bytes: 64,
        ..Limits::default()
    };
    let mut whole = b"GET /".to_vec();
    whole.extend(std::iter::repeat_n(b'a', 70));
    whole.push(b'\n');
    let mut h = RequestHead::new();
    assert_eq!(h.parse(&whole, &limits), Err(UriTooLong));
    assert_eq!(h.parse(&whole[..whole.len() - 1], &limits), Err(UriTooLong));
}

#[test]
fn pipelined_heads_parse_one_at_a_time() {
    let buf = b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n";
    let mut h = RequestHead::new();
    let Ok(Parsed::Complete(n)) = h.parse(buf, &Limits::default()) else {
        panic!()
    };
    assert_eq!(h.path(buf), "/a");
    let rest = &buf[n..];
    assert_eq!(
        h.parse(rest, &Limits::default()),
        Ok(Parsed::Complete(rest.len()))
    );
    assert_eq!(h.path(rest), "/b");
}

/// Trailer fields as owned (name, value) pairs.
type Fields = Vec<(Vec<u8>, Vec<u8>)>;

/// One chunked-decoding rule: name, input, expected data or error.
type ChunkRule = (
    &'static str,
    &'static [u8],
    Result<&'static [u8], ParseError>,
);

/// Decodes a whole chunked body fed in pieces of `step` bytes; returns (data, consumed, trailers).
fn decode_chunked(input: &[u8], step: usize) -> Result<(Vec<u8>, usize, Fields), ParseError> {
    let limits = Limits::default();
    let mut dec = BodyDecoder::new(Framing::Chunked).unwrap();
    let mut data = Vec::new();
    let mut pos = 0;
    // Feed growing windows, as a server appending to a buffer would.
    let mut avail = step.min(input.len());
    loop {
        let s = dec.decode(&input[pos..avail], &limits)?;
        assert!(s.consumed <= avail - pos);
        data.extend_from_slice(s.data);
        pos += s.consumed;
        if s.done {
            let trailers = dec
                .trailers()
                .iter()
                .map(|(n, v)| (n.to_vec(), v.to_vec()))
                .collect();
            return Ok((data, pos, trailers));
        }
        if pos == avail {
            if avail == input.len() {
                return Err(ParseError::InvalidChunkData); // ran out: test helper's "incomplete"
            }
            avail = (avail + step).min(input.len());
        }
    }
}

#[rustfmt::skip]
const CHUNK_RULES: &[ChunkRule] = &[
    ("two chunks (RFC 9112 §7.1)", b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", Ok(b"hello world")),
    ("upper and lower hex", b"A\r\n0123456789\r\na\r\n0123456789\r\n0\r\n\r\n", Ok(b"01234567890123456789")),
    ("leading zeros in size", b"005\r\nhello\r\n000\r\n\r\n", Ok(b"hello")),
    ("chunk extension (§7.1.1)", b"5;name=value\r\nhello\r\n0;x\r\n\r\n", Ok(b"hello")),
    ("BWS before extension (§7.1.1)", b"5 ;a\r\nhello\r\n0\r\n\r\n", Ok(b"hello")),
    ("size 0x5 (§7.1: 1*HEXDIG)", b"0x5\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("size +5", b"+5\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("size -5", b"-5\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("empty size", b"\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("size then junk", b"5 5\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("size overflow", b"10000000000000000\r\n", Err(ChunkSizeOverflow)),
    ("bare LF after size (§7.1)", b"5\nhello\r\n0\r\n\r\n", Err(InvalidChunkSize)),
    ("data longer than size (§7.1)", b"3\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkData)),
    ("data shorter than size", b"7\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkData)),
    ("control byte in extension", b"5;a\x01\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("extensions with BWS, several (§7.1.1)", b"5 ; a = b ;c;d=e\r\nhello\r\n0\r\n\r\n", Ok(b"hello")),
    ("quoted extension value with quoted-pair", b"5;a=\"b \\\" ;c\"\r\nhello\r\n0\r\n\r\n", Ok(b"hello")),
    ("bare semicolon (§7.1.1: a name must follow)", b"5;\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("extension name not a token", b"5;bad[=x\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("extension without a name", b"5;=x\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("extension = without a value", b"5;a=\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("extension value not a token", b"5;a=b@c\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("unterminated quoted value", b"5;a=\"b\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("whitespace before CRLF (BWS only before ; or =)", b"5;a \r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("two names without ;", b"5;a b\r\nhello\r\n0\r\n\r\n", Err(InvalidChunkExtension)),
    ("trailer kept apart (§7.1.2)", b"5\r\nhello\r\n0\r\nX-Sum: 42\r\n\r\n", Ok(b"hello")),
    ("trailer obs-fold", b"0\r\nX: a\r\n b\r\n\r\n", Err(InvalidTrailer)),
    ("trailer bare LF", b"0\r\nX: a\n\r\n", Err(BareLf)),
    ("trailer without colon", b"0\r\nX\r\n\r\n", Err(InvalidTrailer)),
];

#[test]
fn chunked_rules_table_for_every_split() {
    for (name, input, want) in CHUNK_RULES {
        for step in [input.len(), 1, 2, 3, 7] {
            let got = decode_chunked(input, step.max(1)).map(|(d, consumed, _)| {
                assert_eq!(consumed, input.len(), "{name}: consumed");
                d
            });
            assert_eq!(
                got.as_deref().map_err(|e| *e),
                want.map(|w| w),
                "{name} step {step}"
            );
        }
    }
}

#[test]
fn chunked_extension_limit_is_enforced() {
    let mut body = b"1;".to_vec();
    body.extend(std::iter::repeat_n(b'a', crate::CHUNK_EXT_LIMIT + 1));
    body.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
    assert_eq!(
        decode_chunked(&body, body.len()).err(),
        Some(InvalidChunkExtension)
    );
}

#[test]
fn chunked_trailers_are_reported_and_body_stops_at_end() {
    let input = b"3\r\nabc\r\n0\r\nX-One: 1\r\nX-Two:  two \r\n\r\nGET / HTTP/1.1\r\n";
    let (data, consumed, trailers) = decode_chunked(input, 4).unwrap();
    assert_eq!(data, b"abc");
    assert_eq!(&input[consumed..], b"GET / HTTP/1.1\r\n");
    assert_eq!(
        trailers,
        vec![
            (b"X-One".to_vec(), b"1".to_vec()),
            (b"X-Two".to_vec(), b"two".to_vec())
        ]
    );
}

#[test]
fn content_length_body_stops_at_length() {
    let limits = Limits::default();
    let mut dec = BodyDecoder::new(Framing::Length(5)).unwrap();
    let s = dec.decode(b"hel", &limits).unwrap();
    assert_eq!((s.consumed, s.data, s.done), (3, &b"hel"[..], false));
    let s = dec.decode(b"loGET", &limits).unwrap();
    assert_eq!((s.consumed, s.data, s.done), (2, &b"lo"[..], true));
}

/// Content-Length values (RFC 9110 §8.6: 1*DIGIT; RFC 9112 §6.3 rule 5: a list of one repeated
/// value is that value): the one-number fast path and the list reader agree at the edges.
#[test]
fn content_length_values_at_the_edges_of_the_fast_path() {
    use crate::head::parse_content_length as cl;
    assert_eq!(cl(b"0"), Ok(0));
    assert_eq!(cl(b"0005"), Ok(5));
    assert_eq!(cl(b"9999999999999999999"), Ok(9_999_999_999_999_999_999));
    assert_eq!(cl(b"18446744073709551615"), Ok(u64::MAX));
    assert!(cl(b"18446744073709551616").is_err());
    assert!(cl(b"99999999999999999999").is_err());
    assert_eq!(cl(b"27, 27"), Ok(27));
    assert!(cl(b"27, 28").is_err());
    for bad in [&b""[..], b"+1", b"-1", b"1 2", b"0x10", b"1.0", b"\xff"] {
        assert!(cl(bad).is_err(), "{bad:?}");
    }
}
