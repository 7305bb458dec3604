//! gRPC-Web calls (PROTOCOL-WEB.md) through the engine over HTTP/1.1 and HTTP/2
//! ([`TestClient`]): the same methods as gRPC, each answer of the request's content type with
//! its status in a trailer frame (flag 0x80) at the body's end, never in HTTP trailers;
//! `-text` bodies base64 both ways.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use linerate_grpc::frame::Decoder;
use linerate_grpc::proto::benchmark::SumReply;
use linerate_grpc::web::TextDecoder;
use prost::Message as _;

use super::super::tests::{COUNT_UP, FAIL, SLOW_SUM, SUM, Sums, TOTAL, ab, frames};
use super::*;
use crate::Router;
use crate::grpc::{MAX_MESSAGE, over_limit};
use crate::testing::{Protocol as Http, TestClient, TestResponse};

const WEB: &str = "application/grpc-web+proto";
const TEXT: &str = "application/grpc-web-text+proto";

fn router() -> Router {
    Router::new().grpc(Sums {
        called: Arc::new(AtomicUsize::new(0)),
    })
}

/// A client per HTTP version the tests run over.
fn clients() -> Vec<(Http, TestClient)> {
    [Http::Http1, Http::Http2]
        .into_iter()
        .map(|h| (h, TestClient::new(router()).protocol(h)))
        .collect()
}

/// A gRPC-Web call as a browser's client sends it: `x-grpc-web`, the body base64 for `-text`.
fn call(c: &TestClient, content_type: &str, path: &str, body: Vec<u8>) -> TestResponse {
    let body = if content_type.starts_with("application/grpc-web-text") {
        let mut text = Vec::new();
        linerate_grpc::web::encode_text(&body, &mut text);
        text
    } else {
        body
    };
    c.post(path)
        .header("content-type", content_type)
        .header("x-grpc-web", "1")
        .header("accept", content_type)
        .body(body)
        .send()
}

/// An answer's messages and its trailer frame's fields, read as a gRPC-Web client does; the
/// trailer frame must be last and there must be exactly one.
fn read(r: &TestResponse) -> (Vec<i32>, Vec<(String, String)>) {
    let text = r
        .header("content-type")
        .is_some_and(|ct| ct.starts_with("application/grpc-web-text"));
    let mut bytes = Vec::new();
    if text {
        let mut d = TextDecoder::new();
        d.feed(r.body(), &mut bytes).expect("base64");
        d.finish(&mut bytes).expect("base64");
    } else {
        bytes = r.body().to_vec();
    }
    let mut d = Decoder::web_answer(1 << 20, false);
    let mut input = &bytes[..];
    let (mut messages, mut trailers) = (Vec::new(), None);
    while let Some(m) = d.next(&mut input).expect("frames") {
        assert!(trailers.is_none(), "nothing after the trailer frame");
        if m.trailers {
            let fields = linerate_grpc::web::trailer_fields(m.data)
                .map(|(n, v)| {
                    let s = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
                    (s(n), s(v))
                })
                .collect::<Vec<_>>();
            trailers = Some(fields);
        } else {
            messages.push(SumReply::decode(m.data).unwrap().result);
        }
    }
    d.finish().expect("whole frames");
    (messages, trailers.expect("a trailer frame"))
}

fn field<'f>(fields: &'f [(String, String)], name: &str) -> Option<&'f str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Asserts a gRPC-Web answer's shape: 200, the request's content type, no status in the head
/// and no HTTP trailers (browsers cannot read them).
fn assert_web(r: &TestResponse, content_type: &str, why: &str) {
    assert_eq!(r.status(), 200, "{why}");
    assert_eq!(r.header("content-type"), Some(content_type), "{why}");
    assert_eq!(
        r.header("grpc-status"),
        None,
        "{why}: the status is in the body"
    );
    assert!(r.trailers().is_empty(), "{why}: no HTTP trailers");
}

#[test]
fn unary_calls_answer_the_message_then_a_trailer_frame_binary_and_text() {
    for (http, c) in clients() {
        for ct in [WEB, TEXT] {
            let why = format!("{http:?} {ct}");
            // HttpArena's GetSum frame (a=1, b=2).
            let r = call(&c, ct, SUM, vec![0, 0, 0, 0, 4, 8, 1, 16, 2]);
            assert_web(&r, ct, &why);
            let (messages, trailers) = read(&r);
            assert_eq!(messages, [3], "{why}");
            assert_eq!(field(&trailers, "grpc-status"), Some("0"), "{why}");
            // A call answered later, on the worker's runtime.
            let r = call(&c, ct, SLOW_SUM, frames(&[ab(40, 2)]));
            assert_web(&r, ct, &why);
            assert_eq!(read(&r).0, [42], "{why}");
        }
        // The plain names (no `+proto`) are the same protocol; the answer says `+proto`.
        let r = call(&c, "application/grpc-web-text", SUM, frames(&[ab(2, 2)]));
        assert_web(&r, TEXT, "plain -text name");
        assert_eq!(read(&r).0, [4]);
    }
}

#[test]
fn binary_gives_exact_bytes() {
    // The binary answer, byte for byte: the message frame, then 0x80, the length, the block.
    let c = TestClient::new(router());
    let r = call(&c, WEB, SUM, vec![0, 0, 0, 0, 4, 8, 1, 16, 2]);
    let mut want = vec![0, 0, 0, 0, 2, 8, 3];
    want.extend_from_slice(&[0x80, 0, 0, 0, 15]);
    want.extend_from_slice(b"grpc-status:0\r\n");
    assert_eq!(r.body(), want);
    assert_eq!(r.header("content-length"), Some("27"));
}

#[test]
fn a_text_body_in_several_padded_segments_is_read() {
    // PROTOCOL-WEB.md: a sender may base64 and flush whenever it needs to, with padding.
    let c = TestClient::new(router()).http2();
    let body = frames(&[ab(5, 6)]);
    let mut text = Vec::new();
    linerate_grpc::web::encode_text(&body[..4], &mut text);
    linerate_grpc::web::encode_text(&body[4..], &mut text);
    assert!(text[..8].contains(&b'='), "the first segment is padded");
    let r = c.post(SUM).header("content-type", TEXT).body(text).send();
    assert_eq!(read(&r).0, [11]);
}

#[test]
fn server_and_client_streaming_over_web_and_text() {
    for (http, c) in clients() {
        for ct in [WEB, TEXT] {
            let why = format!("{http:?} {ct}");
            let r = call(&c, ct, COUNT_UP, frames(&[ab(3, 0)]));
            assert_web(&r, ct, &why);
            let (messages, trailers) = read(&r);
            assert_eq!(messages, [1, 2, 3], "{why}");
            assert_eq!(field(&trailers, "grpc-status"), Some("0"), "{why}");
            // No message: the trailer frame alone.
            let r = call(&c, ct, COUNT_UP, frames(&[ab(0, 0)]));
            assert_web(&r, ct, &why);
            let (messages, trailers) = read(&r);
            assert!(messages.is_empty(), "{why}");
            assert_eq!(field(&trailers, "grpc-status"), Some("0"), "{why}");
            // A client stream decoded piece by piece (-text as it arrives).
            let r = call(&c, ct, TOTAL, frames(&[ab(1, 2), ab(3, 4)]));
            assert_eq!(read(&r).0, [10], "{why}");
        }
    }
}

/// An error row: path, body, fields, the status and message in the trailer frame.
type Row = (
    &'static str,
    Vec<u8>,
    &'static [(&'static str, &'static str)],
    Code,
    Option<&'static str>,
);

#[test]
fn errors_are_trailer_frames() {
    for (http, c) in clients() {
        for ct in [WEB, TEXT] {
            let why = format!("{http:?} {ct}");
            // Each row: path, body, fields, the status and message in the trailer frame.
            let rows: &[Row] = &[
                (
                    FAIL,
                    frames(&[ab(1, 1)]),
                    &[],
                    Code::NotFound,
                    Some("no such sum: %C3%BC%25"),
                ),
                (
                    "/test.Sum/Nope",
                    frames(&[ab(1, 1)]),
                    &[],
                    Code::Unimplemented,
                    Some("unknown method /test.Sum/Nope"),
                ),
                (
                    SUM,
                    frames(&[ab(1, 1)]),
                    &[("grpc-timeout", "0n")],
                    Code::DeadlineExceeded,
                    None,
                ),
                (SUM, vec![0, 0, 0], &[], Code::Internal, None),
                (
                    SUM,
                    frames(&[ab(1, 1)]),
                    &[("grpc-encoding", "snappy")],
                    Code::Unimplemented,
                    None,
                ),
                (COUNT_UP, Vec::new(), &[], Code::Internal, None),
            ];
            for (path, body, fields, code, message) in rows {
                let mut body = body.clone();
                if ct == TEXT {
                    let mut t = Vec::new();
                    linerate_grpc::web::encode_text(&body, &mut t);
                    body = t;
                }
                let mut req = c.post(path).header("content-type", ct);
                for (n, v) in *fields {
                    req = req.header(*n, *v);
                }
                let r = req.body(body).send();
                let why = format!("{why} {path} {fields:?}");
                assert_web(&r, ct, &why);
                let (messages, trailers) = read(&r);
                assert!(messages.is_empty(), "{why}");
                assert_eq!(
                    field(&trailers, "grpc-status"),
                    Some(code.as_str()),
                    "{why}"
                );
                if let Some(m) = message {
                    assert_eq!(field(&trailers, "grpc-message"), Some(*m), "{why}");
                }
            }
            // A deadline passed while the handler waits.
            let r = c
                .post(SLOW_SUM)
                .header("content-type", ct)
                .header("grpc-timeout", "50m")
                .body({
                    let b = frames(&[ab(1, 60_000)]);
                    if ct == TEXT {
                        let mut t = Vec::new();
                        linerate_grpc::web::encode_text(&b, &mut t);
                        t
                    } else {
                        b
                    }
                })
                .send();
            let trailers = read(&r).1;
            assert_eq!(
                field(&trailers, "grpc-status"),
                Some(Code::DeadlineExceeded.as_str()),
                "{why}"
            );
        }
    }
}

#[test]
fn a_text_body_that_is_not_base64_is_internal() {
    for (_, c) in clients() {
        for path in [SUM, COUNT_UP] {
            let r = c
                .post(path)
                .header("content-type", TEXT)
                .body("AAAA*AAA")
                .send();
            assert_web(&r, TEXT, path);
            let trailers = read(&r).1;
            assert_eq!(
                field(&trailers, "grpc-status"),
                Some(Code::Internal.as_str()),
                "{path}"
            );
        }
    }
}

#[test]
fn a_text_prefix_over_the_limit_is_judged_decoded() {
    // The prefix announces MAX_MESSAGE + 1; base64, its characters read as bytes would be a
    // huge length, so only the decoded prefix says which.
    let over = ((MAX_MESSAGE + 1) as u32).to_be_bytes();
    let at = (MAX_MESSAGE as u32).to_be_bytes();
    let text = |p: [u8; 4]| {
        let mut t = Vec::new();
        linerate_grpc::web::encode_text(&[0, p[0], p[1], p[2], p[3], 8], &mut t);
        t
    };
    let ct = Some(TEXT.as_bytes());
    let resp = over_limit(&text(over), || ct).expect("refused");
    assert_eq!(resp.field("content-type"), Some(TEXT));
    assert!(
        over_limit(&text(at), || ct).is_none(),
        "the limit itself is fine"
    );
    assert!(
        over_limit(&text(over)[..7], || ct).is_none(),
        "not judged before 8 characters"
    );
    // A binary gRPC-Web body is judged as gRPC's, answered in its own protocol.
    let bin = [0, over[0], over[1], over[2], over[3]];
    let resp = over_limit(&bin, || Some(WEB.as_bytes())).expect("refused");
    assert_eq!(resp.field("content-type"), Some(WEB));
    assert_eq!(resp.field("grpc-status"), None, "the status is in the body");
    let resp = over_limit(&bin, || None).expect("refused");
    assert_eq!(
        resp.field("grpc-status"),
        Some(Code::ResourceExhausted.as_str())
    );
}

#[test]
fn a_browser_preflight_and_call_pass_the_cors_layer() {
    // What a gRPC-Web client in a browser sends: the preflight for POST with its fields, then
    // the call, whose grpc-status the page reads from the body (the exposed fields matter
    // only for a status in the head).
    let router = || {
        router().layer(
            crate::layers::Cors::origins(["https://app.example"])
                .allow_headers(["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout"])
                .expose_headers(["grpc-status", "grpc-message"]),
        )
    };
    for h in [Http::Http1, Http::Http2] {
        let c = TestClient::new(router()).protocol(h);
        let r = c
            .options(SUM)
            .header("origin", "https://app.example")
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "content-type,x-grpc-web,x-user-agent,grpc-timeout",
            )
            .send();
        assert_eq!(r.status(), 204, "{h:?}");
        assert_eq!(
            r.header("access-control-allow-origin"),
            Some("https://app.example")
        );
        let allowed = r.header("access-control-allow-headers").unwrap_or("");
        for f in ["x-grpc-web", "x-user-agent", "grpc-timeout", "content-type"] {
            assert!(allowed.contains(f), "{h:?} {f} in {allowed}");
        }
        assert!(
            r.header("access-control-allow-methods")
                .unwrap()
                .contains("POST")
        );
        for (path, want) in [(SUM, vec![3]), (COUNT_UP, vec![1])] {
            let r = c
                .post(path)
                .header("origin", "https://app.example")
                .header("content-type", TEXT)
                .header("x-grpc-web", "1")
                .body({
                    let mut t = Vec::new();
                    linerate_grpc::web::encode_text(&frames(&[ab(1, 2)]), &mut t);
                    t
                })
                .send();
            assert_eq!(
                r.header("access-control-allow-origin"),
                Some("https://app.example"),
                "{h:?} {path}"
            );
            assert_eq!(
                r.header("access-control-expose-headers"),
                Some("grpc-status, grpc-message")
            );
            assert_eq!(read(&r).0, want, "{h:?} {path}");
        }
    }
}

#[test]
fn the_logged_status_is_read_from_every_kind_of_answer() {
    use super::super::method::Reply;
    let not_found = || Status::new(Code::NotFound, "gone");
    let ok = || {
        Ok(Reply {
            frame: vec![0, 0, 0, 0, 2, 8, 3],
            metadata: Metadata::new(),
            trailers: Metadata::new(),
        })
    };
    let rows: Vec<(crate::response::Response, Option<&str>, &str)> = vec![
        (
            unary_answer(Protocol::Grpc, ok()),
            Some("0"),
            "gRPC, in trailers",
        ),
        (
            failed(Protocol::Grpc, &not_found()),
            Some("5"),
            "gRPC trailers-only",
        ),
        (
            unary_answer(Protocol::Web, ok()),
            Some("0"),
            "web, the trailer frame",
        ),
        (
            failed(Protocol::Web, &not_found()),
            Some("5"),
            "web, the frame alone",
        ),
        (
            unary_answer(Protocol::WebText, ok()),
            Some("0"),
            "text, base64",
        ),
        (
            failed(Protocol::WebText, &not_found()),
            Some("5"),
            "text, the frame alone",
        ),
        (
            answer::head(&Metadata::new()).stream().0,
            None,
            "a stream: its status comes later",
        ),
        (crate::response::Response::text("plain"), None, "not gRPC"),
    ];
    for (resp, want, why) in rows {
        assert_eq!(logged_status(&resp), want, "{why}");
    }
}
