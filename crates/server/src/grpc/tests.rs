//! gRPC calls through the engine's own HTTP/2 state machine ([`TestClient`]): each rule of
//! PROTOCOL-HTTP2.md the layer owns, answered with its exact fields, frames and status codes.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use linerate_grpc::proto::benchmark::{SumReply, SumRequest};
use prost::Message as _;

use super::*;
use crate::Router;
use crate::testing::{TestClient, TestResponse};

pub(super) const SUM: &str = "/test.Sum/Add";
pub(super) const SLOW_SUM: &str = "/test.Sum/SlowAdd";
pub(super) const FAIL: &str = "/test.Sum/Fail";
pub(super) const PANIC: &str = "/test.Sum/Panic";
pub(super) const ECHO_MD: &str = "/test.Sum/EchoMetadata";
pub(super) const COUNT_UP: &str = "/test.Sum/CountUp";
pub(super) const TOTAL: &str = "/test.Sum/Total";
pub(super) const RUNNING: &str = "/test.Sum/Running";

/// A test service: sums, failures, metadata and the three streaming kinds over
/// `SumRequest`/`SumReply`; `called` counts the calls that reached a handler.
pub(super) struct Sums {
    pub(super) called: Arc<AtomicUsize>,
}

fn sum(r: &SumRequest) -> SumReply {
    SumReply {
        result: r.a.wrapping_add(r.b),
    }
}

impl Service for Sums {
    fn name(&self) -> &'static str {
        "test.Sum"
    }

    fn methods(self) -> Vec<Method> {
        let called = self.called;
        let c = called.clone();
        vec![
            Method::unary(SUM, move |req: Request<SumRequest>| {
                c.fetch_add(1, Ordering::Relaxed);
                std::future::ready(Ok(Response::new(sum(req.get_ref()))))
            }),
            Method::unary(SLOW_SUM, |req: Request<SumRequest>| async move {
                // `b` milliseconds, so a test can outwait a deadline.
                tokio::time::sleep(Duration::from_millis(req.get_ref().b as u64)).await;
                Ok(Response::new(sum(req.get_ref())))
            }),
            Method::unary(FAIL, |_: Request<SumRequest>| {
                std::future::ready(Err::<Response<SumReply>, _>(Status::new(
                    Code::NotFound,
                    "no such sum: ü%",
                )))
            }),
            Method::unary(PANIC, |_: Request<SumRequest>| async move {
                if true {
                    panic!("a handler bug");
                }
                Ok(Response::new(SumReply::default()))
            }),
            Method::unary(ECHO_MD, |req: Request<SumRequest>| {
                let mut resp = Response::new(sum(req.get_ref()));
                let seen = req.metadata().get("x-in").unwrap_or("none").to_string();
                let bin = req
                    .metadata()
                    .get_bin("x-in-bin")
                    .unwrap_or(b"none")
                    .to_vec();
                resp.metadata_mut().insert("x-out", seen).unwrap();
                resp.trailers_mut().insert_bin("x-out-bin", bin).unwrap();
                std::future::ready(Ok(resp))
            }),
            // Server streaming: `a` messages counting 1..=a.
            Method::server_streaming(COUNT_UP, |req: Request<SumRequest>, mut out| async move {
                for i in 1..=req.get_ref().a {
                    if let Err(s) = out.send(&SumReply { result: i }).await {
                        return (Err(s), out);
                    }
                }
                (Ok(()), out)
            }),
            // Client streaming: the sum of every message's a + b.
            Method::client_streaming(
                TOTAL,
                |mut req: Request<Streaming<SumRequest>>| async move {
                    let mut total = 0;
                    while let Some(m) = req.get_mut().message().await? {
                        total += m.a + m.b;
                    }
                    Ok(Response::new(SumReply { result: total }))
                },
            ),
            // Bidirectional: each message answered with the running total.
            Method::bidi_streaming(
                RUNNING,
                |mut req: Request<Streaming<SumRequest>>, mut out| async move {
                    let mut total = 0;
                    loop {
                        match req.get_mut().message().await {
                            Ok(Some(m)) => total += m.a + m.b,
                            Ok(None) => return (Ok(()), out),
                            Err(s) => return (Err(s), out),
                        }
                        if let Err(s) = out.send(&SumReply { result: total }).await {
                            return (Err(s), out);
                        }
                    }
                },
            ),
        ]
    }
}

fn client() -> (TestClient, Arc<AtomicUsize>) {
    let called = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .get("/plain", |_| crate::Response::text("plain"))
        .grpc(Sums {
            called: called.clone(),
        });
    (TestClient::new(router).http2(), called)
}

/// Length-prefixed frames of `messages`.
pub(super) fn frames(messages: &[SumRequest]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        linerate_grpc::frame::encode(m, &mut out);
    }
    out
}

fn call(c: &TestClient, path: &str, body: Vec<u8>, fields: &[(&str, &str)]) -> TestResponse {
    let mut req = c
        .post(path)
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (n, v) in fields {
        req = req.header(*n, *v);
    }
    req.body(body).send()
}

pub(super) fn ab(a: i32, b: i32) -> SumRequest {
    SumRequest { a, b }
}

/// The status a call ended with: the trailers', or a trailers-only answer's head.
fn status(r: &TestResponse) -> (String, Option<String>) {
    let s = r
        .trailer("grpc-status")
        .or_else(|| r.header("grpc-status"))
        .unwrap_or_else(|| panic!("no grpc-status: {:?} {:?}", r.headers(), r.trailers()));
    let m = r
        .trailer("grpc-message")
        .or_else(|| r.header("grpc-message"));
    (s.to_string(), m.map(str::to_string))
}

/// The messages of an answer's body.
fn replies(body: &[u8]) -> Vec<i32> {
    let mut d = linerate_grpc::frame::Decoder::new(1 << 20, false);
    let mut input = body;
    let mut out = Vec::new();
    while let Some(m) = d.next(&mut input).unwrap() {
        out.push(SumReply::decode(m.data).unwrap().result);
    }
    d.finish().unwrap();
    out
}

/// Asserts a trailers-only answer with `code`: 200, the status in the head, no body.
fn assert_trailers_only(r: &TestResponse, code: Code) {
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/grpc"));
    assert_eq!(
        r.header("grpc-status"),
        Some(code.as_str()),
        "{:?}",
        r.headers()
    );
    assert!(r.body().is_empty(), "trailers-only: no body");
    assert!(r.trailers().is_empty(), "trailers-only: no trailers");
}

#[test]
fn a_unary_call_answers_its_message_then_ok_trailers() {
    // HttpArena's unary-grpc frame (a=1, b=2) and its 7-byte answer (result=3).
    let (c, called) = client();
    let r = call(&c, SUM, vec![0, 0, 0, 0, 4, 8, 1, 16, 2], &[]);
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/grpc"));
    assert_eq!(r.body(), [0, 0, 0, 0, 2, 8, 3]);
    assert_eq!(r.trailer("grpc-status"), Some("0"));
    assert_eq!(r.trailer("grpc-message"), None, "OK carries no message");
    assert_eq!(called.load(Ordering::Relaxed), 1);
}

#[test]
fn a_unary_call_that_waits_is_answered_when_its_future_ends() {
    let (c, _) = client();
    let r = call(&c, SLOW_SUM, frames(&[ab(40, 2)]), &[]);
    assert_eq!(replies(r.body()), [42]);
    assert_eq!(status(&r).0, "0");
}

#[test]
fn a_failed_call_is_trailers_only_with_its_message_percent_encoded() {
    // PROTOCOL-HTTP2.md "Trailers-Only", and grpc-message's percent-encoding of ü and %.
    let (c, _) = client();
    let r = call(&c, FAIL, frames(&[ab(1, 1)]), &[]);
    assert_trailers_only(&r, Code::NotFound);
    assert_eq!(r.header("grpc-message"), Some("no such sum: %C3%BC%25"));
}

#[test]
fn unknown_methods_and_services_are_unimplemented_and_other_paths_stay_http() {
    let (c, _) = client();
    for path in ["/test.Sum/Nope", "/other.Service/Call"] {
        let r = call(&c, path, frames(&[ab(1, 1)]), &[]);
        assert_trailers_only(&r, Code::Unimplemented);
    }
    // Not a gRPC request: the router's ordinary answers.
    assert_eq!(c.post("/other.Service/Call").send().status(), 404);
    assert_eq!(c.get("/plain").send().text(), "plain");
}

#[test]
fn a_request_that_is_not_grpc_is_415() {
    // PROTOCOL-HTTP2.md: "If Content-Type does not begin with application/grpc, gRPC servers
    // SHOULD respond with HTTP status of 415".
    let (c, called) = client();
    let r = c
        .post(SUM)
        .header("content-type", "application/json")
        .body(frames(&[ab(1, 2)]))
        .send();
    assert_eq!(r.status(), 415);
    assert_eq!(called.load(Ordering::Relaxed), 0);
}

#[test]
fn broken_frames_end_the_call_with_their_status_and_the_connection_goes_on() {
    let (c, called) = client();
    let over = (5u32 << 20).to_be_bytes();
    let rows: &[(&[u8], Code, &str)] = &[
        // The prefix announces 5 MiB, over the 4 MiB limit: judged on the prefix.
        (
            &[0, over[0], over[1], over[2], over[3], 1, 2, 3],
            Code::ResourceExhausted,
            "prefix over the limit",
        ),
        // Compressed-Flag 1 without a grpc-encoding.
        (
            &[1, 0, 0, 0, 2, 8, 1],
            Code::Internal,
            "compressed flag without an encoding",
        ),
        // The body ends inside the message (END_STREAM after 3 of 10 bytes).
        (
            &[0, 0, 0, 0, 10, 8, 1, 16],
            Code::Internal,
            "truncated at END_STREAM",
        ),
        // Inside the prefix.
        (&[0, 0, 0], Code::Internal, "truncated prefix"),
        // No message at all.
        (&[], Code::Internal, "no message"),
        // A flag byte other than 0 or 1.
        (&[7, 0, 0, 0, 0], Code::Internal, "unknown flag"),
    ];
    for (body, code, why) in rows {
        let r = call(&c, SUM, body.to_vec(), &[]);
        assert_eq!(status(&r).0, code.as_str(), "{why}");
        assert!(r.body().is_empty(), "{why}: no message");
    }
    // Two messages for a unary call.
    let r = call(&c, SUM, frames(&[ab(1, 1), ab(2, 2)]), &[]);
    assert_eq!(status(&r).0, Code::Internal.as_str());
    assert_eq!(
        called.load(Ordering::Relaxed),
        0,
        "no broken call reached the handler"
    );
    // The same connection still serves.
    let r = call(&c, SUM, frames(&[ab(2, 3)]), &[]);
    assert_eq!(replies(r.body()), [5]);
}

#[test]
fn a_message_over_the_limit_is_refused_at_its_prefix() {
    // A real 4 MiB + 1 message: RESOURCE_EXHAUSTED (as grpc-go answers), not the HTTP 413 a
    // body over a route's limit gets. (The test client declares the length: refused at the
    // head; one that declares none is refused at the prefix, `over_limit`.)
    let (c, called) = client();
    let len = MAX_MESSAGE + 1;
    let mut body = vec![0];
    body.extend_from_slice(&(len as u32).to_be_bytes());
    body.resize(5 + len, 0);
    let r = call(&c, SUM, body, &[]);
    assert_trailers_only(&r, Code::ResourceExhausted);
    assert_eq!(called.load(Ordering::Relaxed), 0);
}

#[test]
fn deadlines_zero_or_passed_end_the_call_deadline_exceeded() {
    let (c, called) = client();
    // A deadline of 0: answered without calling the handler.
    let r = call(&c, SUM, frames(&[ab(1, 2)]), &[("grpc-timeout", "0n")]);
    assert_trailers_only(&r, Code::DeadlineExceeded);
    assert_eq!(called.load(Ordering::Relaxed), 0);
    // A handler waiting 60 s under a 50 ms deadline is dropped at it.
    let r = call(
        &c,
        SLOW_SUM,
        frames(&[ab(1, 60_000)]),
        &[("grpc-timeout", "50m")],
    );
    assert_trailers_only(&r, Code::DeadlineExceeded);
    // A malformed grpc-timeout is INTERNAL (grpc-go's answer).
    let r = call(&c, SUM, frames(&[ab(1, 2)]), &[("grpc-timeout", "1x")]);
    assert_trailers_only(&r, Code::Internal);
}

#[test]
fn gzip_messages_are_read_and_unknown_codings_refused() {
    let (c, _) = client();
    let plain = ab(20, 22).encode_to_vec();
    let mut gz = Vec::new();
    linerate_grpc::compress::compress(linerate_grpc::compress::Encoding::Gzip, &plain, &mut gz);
    let mut body = vec![1];
    body.extend_from_slice(&(gz.len() as u32).to_be_bytes());
    body.extend_from_slice(&gz);
    let r = call(&c, SUM, body.clone(), &[("grpc-encoding", "gzip")]);
    assert_eq!(replies(r.body()), [42]);
    let r = call(&c, SUM, body, &[("grpc-encoding", "snappy")]);
    assert_trailers_only(&r, Code::Unimplemented);
    assert_eq!(r.header("grpc-accept-encoding"), Some("identity,gzip"));
}

#[test]
fn a_panicking_handler_ends_its_call_internal_and_the_connection_goes_on() {
    let (c, _) = client();
    let r = call(&c, PANIC, frames(&[ab(1, 1)]), &[]);
    assert_trailers_only(&r, Code::Internal);
    let r = call(&c, SUM, frames(&[ab(1, 1)]), &[]);
    assert_eq!(replies(r.body()), [2]);
}

#[test]
fn metadata_comes_in_and_goes_out_binary_values_base64() {
    let (c, _) = client();
    // "hi" base64 unpadded (aGk) in; the handler echoes it as binary trailing metadata.
    let r = call(
        &c,
        ECHO_MD,
        frames(&[ab(1, 1)]),
        &[("x-in", "hello"), ("x-in-bin", "aGk")],
    );
    assert_eq!(r.header("x-out"), Some("hello"));
    assert_eq!(r.trailer("x-out-bin"), Some("aGk"));
    assert_eq!(r.trailer("grpc-status"), Some("0"));
    // A -bin value that is not base64 is INTERNAL.
    let r = call(&c, ECHO_MD, frames(&[ab(1, 1)]), &[("x-in-bin", "!!")]);
    assert_trailers_only(&r, Code::Internal);
}

#[test]
fn server_streaming_sends_each_message_then_the_status() {
    let (c, _) = client();
    let r = call(&c, COUNT_UP, frames(&[ab(3, 0)]), &[]);
    assert_eq!(replies(r.body()), [1, 2, 3]);
    assert_eq!(r.trailer("grpc-status"), Some("0"));
    // No message: trailers-only OK (the interop suite's empty_stream).
    let r = call(&c, COUNT_UP, frames(&[ab(0, 0)]), &[]);
    assert_trailers_only(&r, Code::Ok);
    // Its one request message missing: INTERNAL.
    let r = call(&c, COUNT_UP, Vec::new(), &[]);
    assert_trailers_only(&r, Code::Internal);
}

#[test]
fn client_and_bidirectional_streams_read_every_message() {
    let (c, _) = client();
    let three = frames(&[ab(1, 2), ab(3, 4), ab(5, 6)]);
    let r = call(&c, TOTAL, three.clone(), &[]);
    assert_eq!(replies(r.body()), [21]);
    assert_eq!(r.trailer("grpc-status"), Some("0"));
    let r = call(&c, RUNNING, three, &[]);
    assert_eq!(replies(r.body()), [3, 10, 21]);
    assert_eq!(r.trailer("grpc-status"), Some("0"));
    // A stream whose last message is cut off: the messages before it are answered, then
    // INTERNAL.
    let mut cut = frames(&[ab(1, 2)]);
    cut.extend_from_slice(&[0, 0, 0, 0, 9, 8]);
    let r = call(&c, RUNNING, cut, &[]);
    assert_eq!(replies(r.body()), [3]);
    assert_eq!(r.trailer("grpc-status"), Some(Code::Internal.as_str()));
}

#[test]
fn a_body_is_refused_as_soon_as_its_prefix_is_over_the_limit() {
    let over = ((MAX_MESSAGE + 1) as u32).to_be_bytes();
    assert!(
        over_limit(&[0, over[0], over[1]], || None).is_none(),
        "not judged before the prefix"
    );
    let resp = over_limit(&[0, over[0], over[1], over[2], over[3]], || None).expect("refused");
    assert_eq!(
        resp.field("grpc-status"),
        Some(Code::ResourceExhausted.as_str())
    );
    let at = (MAX_MESSAGE as u32).to_be_bytes();
    assert!(
        over_limit(&[0, at[0], at[1], at[2], at[3], 1, 2], || None).is_none(),
        "the limit itself is fine"
    );
}

#[test]
fn grpc_content_types_are_recognised() {
    let rows: &[(Option<&[u8]>, bool)] = &[
        (Some(b"application/grpc"), true),
        (Some(b"application/grpc+proto"), true),
        (Some(b"Application/GRPC"), true),
        (Some(b"application/grpc-web"), false),
        (Some(b"application/grpcx"), false),
        (Some(b"application/json"), false),
        (None, false),
    ];
    for (ct, want) in rows {
        assert_eq!(is_grpc(*ct), *want, "{ct:?}");
    }
}
