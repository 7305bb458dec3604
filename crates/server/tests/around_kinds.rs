//! Async layers over every kind of route, through the in-process test
//! client over HTTP/1.1 and HTTP/2 framing, and a real server for backpressure: deferred,
//! `deferred_incoming`, streaming (`BodySink`), SSE and gRPC (unary and streaming) routes
//! under one `around` layer that passes, answers 401 without the handler, or awaits a timer
//! then passes; a gRPC route's layer answers as gRPC statuses (trailers-only, HTTP 200), its
//! route timeout as DEADLINE_EXCEEDED (a streaming method's future dropped with it); a sync
//! layer's early answer on a gRPC route; a streaming upload held by an awaiting layer without
//! being buffered, over HTTP/1.1 and HTTP/2; an async layer's early answer leaving the
//! connection as a sync layer's does; `route_layer`. WebSocket routes under async layers:
//! tests/around_ws.rs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use linerate_grpc::proto::benchmark::{SumReply, SumRequest};
use linerate_server::grpc::{self, Code, Status, Streaming};
use linerate_server::sse::{Event, Sse};
use linerate_server::testing::{Protocol, TestClient, TestResponse, TestServer};
use linerate_server::{
    BodySink, Extensions, IncomingBody, Layer, Method, Next, OnWorker, OwnedRequest, Request,
    Response, Router,
};
use prost::Message as _;

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

/// What a layer does: reads `x-mode` (`pass`, `deny`, `wait`) as an auth layer reads a
/// token; `deny` answers 401 without `next`, `wait` awaits a timer first.
async fn gate(req: OwnedRequest, next: Next) -> Response {
    let mode = req.header("x-mode").map(|m| m.to_vec()).unwrap_or_default();
    match &mode[..] {
        b"deny" => return Response::text("no token\n").status(401),
        b"wait" => tokio::time::sleep(Duration::from_millis(5)).await,
        _ => {}
    }
    let mut resp = next.run(req).await;
    resp.set_header("x-gate", "passed").unwrap();
    resp
}

/// A sink counting what it is fed.
struct Count(usize);

impl BodySink for Count {
    fn data(&mut self, chunk: &[u8]) {
        self.0 += chunk.len();
    }
    fn finish(self: Box<Self>, _: &Request<'_>) -> Response {
        Response::text_owned(format!("streamed {}", self.0))
    }
}

/// One route of each kind that is neither a sync nor an `async` handler, under [`gate`];
/// `calls` counts the handlers that ran.
fn kinds(calls: &Arc<AtomicUsize>) -> Router {
    let (c1, c2, c3, c4) = (calls.clone(), calls.clone(), calls.clone(), calls.clone());
    Router::new()
        .deferred(Method::Post, "/deferred", move |req, res| {
            c1.fetch_add(1, Ordering::SeqCst);
            let n = req.body().len();
            std::thread::spawn(move || res.send(format!("deferred {n}")));
        })
        .deferred_incoming(
            Method::Post,
            "/incoming",
            move |_, mut body: IncomingBody, res| {
                c2.fetch_add(1, Ordering::SeqCst);
                OnWorker_spawn(async move {
                    let mut n = 0;
                    while let Some(Ok(piece)) = body.chunk().await {
                        n += piece.len();
                    }
                    res.send(format!("incoming {n}"));
                });
            },
        )
        .streaming(Method::Post, "/streaming", move |_| {
            c3.fetch_add(1, Ordering::SeqCst);
            Box::new(Count(0))
        })
        .get("/sse", move |_| {
            c4.fetch_add(1, Ordering::SeqCst);
            let (resp, events) = Sse::new().keep_alive(None).start();
            std::thread::spawn(move || {
                events.send(&Event::new("one")).unwrap();
                events.send(&Event::new("two")).unwrap();
                events.end();
            });
            resp
        })
        .around(gate)
}

/// Runs `fut` on the worker's runtime (what `OnWorker` spawns).
#[allow(non_snake_case)]
fn OnWorker_spawn(fut: impl std::future::Future<Output = ()> + Send + 'static) {
    use linerate_server::Spawn;
    OnWorker.spawn(Box::pin(fut));
}

fn send(c: &TestClient, method: &str, path: &str, mode: &str, body: &[u8]) -> TestResponse {
    let req = match method {
        "GET" => c.get(path),
        _ => c.post(path),
    };
    req.header("x-mode", mode).body(body.to_vec()).send()
}

#[test]
fn deferred_incoming_streaming_and_sse_routes_under_an_async_layer_pass_wait_or_are_refused_early()
{
    let body = vec![b'x'; 200_000];
    let cases: &[(&str, &str, &str)] = &[
        ("POST", "/deferred", "deferred 200000"),
        ("POST", "/incoming", "incoming 200000"),
        ("POST", "/streaming", "streamed 200000"),
        ("GET", "/sse", "data: one\n\ndata: two\n\n"),
    ];
    for protocol in PROTOCOLS {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = TestClient::new(kinds(&calls)).protocol(protocol);
        for (method, path, want) in cases {
            let sent: &[u8] = if *method == "GET" { b"" } else { &body };
            for mode in ["pass", "wait"] {
                let r = send(&c, method, path, mode, sent);
                assert_eq!(
                    (r.status(), r.text().as_str(), r.header("x-gate")),
                    (200, *want, Some("passed")),
                    "{protocol:?} {path} {mode}"
                );
            }
            let before = calls.load(Ordering::SeqCst);
            let r = send(&c, method, path, "deny", sent);
            assert_eq!(
                (r.status(), r.text().as_str()),
                (401, "no token\n"),
                "{protocol:?} {path}"
            );
            assert_eq!(
                calls.load(Ordering::SeqCst),
                before,
                "{protocol:?} {path}: the handler ran after the layer's 401"
            );
        }
        // The connection is still good after the early answers (their bodies thrown away).
        let r = send(&c, "POST", "/streaming", "pass", b"abc");
        assert_eq!(r.text(), "streamed 3", "{protocol:?}");
    }
}

// ---- gRPC ----

const ADD: &str = "/test.Sum/Add";
const SLOW: &str = "/test.Sum/Slow";
const TOTAL: &str = "/test.Sum/Total";
const COUNT_UP: &str = "/test.Sum/CountUp";
const HANG: &str = "/test.Sum/Hang";

/// Set when a `Hang` call's future is dropped.
static HANG_DROPPED: AtomicBool = AtomicBool::new(false);

/// Sets [`HANG_DROPPED`] when dropped.
struct DropFlag;

impl Drop for DropFlag {
    fn drop(&mut self) {
        HANG_DROPPED.store(true, Ordering::SeqCst);
    }
}

/// `a + b`, unary; `Slow` waits `b` ms; `Total` sums a client stream; `CountUp` streams
/// 1..=a back. `calls` counts the handlers that ran.
struct Sums(Arc<AtomicUsize>);

impl grpc::Service for Sums {
    fn name(&self) -> &'static str {
        "test.Sum"
    }

    fn methods(self) -> Vec<grpc::Method> {
        let (c1, c2, c3) = (self.0.clone(), self.0.clone(), self.0.clone());
        vec![
            grpc::Method::unary(ADD, move |req: grpc::Request<SumRequest>| {
                c1.fetch_add(1, Ordering::SeqCst);
                let r = req.get_ref();
                std::future::ready(Ok(grpc::Response::new(SumReply { result: r.a + r.b })))
            }),
            grpc::Method::unary(SLOW, |req: grpc::Request<SumRequest>| async move {
                tokio::time::sleep(Duration::from_millis(req.get_ref().b as u64)).await;
                Ok(grpc::Response::new(SumReply { result: 0 }))
            }),
            grpc::Method::client_streaming(
                TOTAL,
                move |mut req: grpc::Request<Streaming<SumRequest>>| {
                    c2.fetch_add(1, Ordering::SeqCst);
                    async move {
                        let mut total = 0;
                        while let Some(m) = req.get_mut().message().await? {
                            total += m.a + m.b;
                        }
                        Ok(grpc::Response::new(SumReply { result: total }))
                    }
                },
            ),
            // Client streaming that never answers: only a timeout ends it.
            grpc::Method::client_streaming(
                HANG,
                |_: grpc::Request<Streaming<SumRequest>>| async move {
                    let _flag = DropFlag;
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    Ok(grpc::Response::new(SumReply { result: 0 }))
                },
            ),
            grpc::Method::server_streaming(
                COUNT_UP,
                move |req: grpc::Request<SumRequest>, mut out| {
                    c3.fetch_add(1, Ordering::SeqCst);
                    async move {
                        for i in 1..=req.get_ref().a {
                            if let Err(s) = out.send(&SumReply { result: i }).await {
                                return (Err::<(), Status>(s), out);
                            }
                        }
                        (Ok(()), out)
                    }
                },
            ),
        ]
    }
}

fn frames(messages: &[SumRequest]) -> Vec<u8> {
    let mut out = Vec::new();
    for m in messages {
        linerate_grpc::frame::encode(m, &mut out);
    }
    out
}

fn ab(a: i32, b: i32) -> SumRequest {
    SumRequest { a, b }
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

/// The status a call ended with (the trailers', or a trailers-only answer's head) and its
/// message.
fn status(r: &TestResponse) -> (String, Option<String>) {
    let s = r
        .trailer("grpc-status")
        .or_else(|| r.header("grpc-status"))
        .unwrap_or_else(|| panic!("no grpc-status: {} {:?}", r.status(), r.headers()));
    let m = r
        .trailer("grpc-message")
        .or_else(|| r.header("grpc-message"));
    (s.to_string(), m.map(str::to_string))
}

fn replies(body: &[u8]) -> Vec<i32> {
    let mut d = linerate_grpc::frame::Decoder::new(1 << 20, false);
    let mut input = body;
    let mut out = Vec::new();
    while let Some(m) = d.next(&mut input).unwrap() {
        out.push(SumReply::decode(m.data).unwrap().result);
    }
    out
}

fn assert_trailers_only(r: &TestResponse, code: Code, what: &str) {
    assert_eq!(r.status(), 200, "{what}");
    assert_eq!(r.header("content-type"), Some("application/grpc"), "{what}");
    assert_eq!(status(r).0, (code as i32).to_string(), "{what}");
    assert!(
        r.body().is_empty(),
        "{what}: a trailers-only answer has no body"
    );
}

/// The bearer check an axum + tonic team puts over REST and gRPC alike: a timer (the lookup
/// a Redis check waits for), then the handler or a 401.
async fn bearer(req: OwnedRequest, next: Next) -> Response {
    tokio::time::sleep(Duration::from_millis(2)).await;
    if req.header("authorization") != Some(b"Bearer good") {
        return Response::text("who are you?").status(401);
    }
    let mut resp = next.run(req).await;
    resp.set_header("x-auth", "ok").unwrap();
    resp
}

#[test]
fn grpc_unary_and_streaming_methods_under_an_async_auth_layer_pass_or_end_unauthenticated() {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .get("/rest", |_| "rest")
        .grpc(Sums(calls.clone()))
        .around(bearer);
    let c = TestClient::new(router).http2();
    let good = [("authorization", "Bearer good")];
    // Passed: each kind of method answers, and the layer's code after `next` saw it.
    let r = call(&c, ADD, frames(&[ab(2, 3)]), &good);
    assert_eq!((status(&r).0.as_str(), replies(r.body())), ("0", vec![5]));
    assert_eq!(r.header("x-auth"), Some("ok"));
    let r = call(&c, TOTAL, frames(&[ab(1, 2), ab(3, 4)]), &good);
    assert_eq!((status(&r).0.as_str(), replies(r.body())), ("0", vec![10]));
    let r = call(&c, COUNT_UP, frames(&[ab(3, 0)]), &good);
    assert_eq!(
        (status(&r).0.as_str(), replies(r.body())),
        ("0", vec![1, 2, 3])
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    // Refused: UNAUTHENTICATED, trailers-only, the layer's text as the message, no handler.
    for path in [ADD, TOTAL, COUNT_UP] {
        let r = call(
            &c,
            path,
            frames(&[ab(1, 1)]),
            &[("authorization", "Bearer bad")],
        );
        assert_trailers_only(&r, Code::Unauthenticated, path);
        assert_eq!(status(&r).1.as_deref(), Some("who are you?"), "{path}");
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "no handler ran for a refused call"
    );
    // The REST route under the same layer: a plain 401.
    let r = c.get("/rest").send();
    assert_eq!((r.status(), r.text().as_str()), (401, "who are you?"));
    let r = c.get("/rest").header("authorization", "Bearer good").send();
    assert_eq!((r.status(), r.text().as_str()), (200, "rest"));
}

/// Answers the status named by `x-answer` without calling `next`.
async fn answer_with(req: OwnedRequest, next: Next) -> Response {
    match req.header("x-answer") {
        Some(s) => {
            let status: u16 = std::str::from_utf8(s).unwrap().parse().unwrap();
            Response::text("refused").status(status)
        }
        None => next.run(req).await,
    }
}

#[test]
fn a_layers_http_answer_on_a_grpc_route_becomes_the_grpc_status_it_means() {
    let router = Router::new().grpc(Sums(Arc::default())).around(answer_with);
    let c = TestClient::new(router).http2();
    let table: &[(&str, Code)] = &[
        ("401", Code::Unauthenticated),
        ("403", Code::PermissionDenied),
        ("429", Code::ResourceExhausted),
        ("503", Code::Unavailable),
        ("502", Code::Unavailable),
        ("504", Code::Unavailable),
        ("400", Code::Internal),
        ("404", Code::Unimplemented),
        ("500", Code::Unknown),
        ("418", Code::Unknown),
    ];
    for (http, code) in table {
        for path in [ADD, TOTAL] {
            let r = call(&c, path, frames(&[ab(1, 1)]), &[("x-answer", http)]);
            assert_trailers_only(&r, *code, &format!("HTTP {http} on {path}"));
            assert_eq!(status(&r).1.as_deref(), Some("refused"));
        }
    }
    // gRPC-Web over HTTP/1.1: the status in the trailer frame, HTTP 200.
    let web = TestClient::new(Router::new().grpc(Sums(Arc::default())).around(answer_with));
    let r = web
        .post(ADD)
        .header("content-type", "application/grpc-web+proto")
        .header("x-answer", "403")
        .body(frames(&[ab(1, 1)]))
        .send();
    assert_eq!(r.status(), 200);
    assert_eq!(r.header("content-type"), Some("application/grpc-web+proto"));
    let text = String::from_utf8_lossy(r.body()).into_owned();
    assert!(text.contains("grpc-status:7"), "{text:?}");
    // Not a gRPC call by its content type: HTTP, the method's 415 and the layer's 403 alike.
    let plain = |answer: Option<&str>| {
        let mut req = web.post(ADD).header("content-type", "text/plain");
        if let Some(a) = answer {
            req = req.header("x-answer", a);
        }
        req.body("x").send()
    };
    assert_eq!(plain(None).status(), 415);
    let r = plain(Some("403"));
    assert_eq!((r.status(), r.text().as_str()), (403, "refused"));
}

/// A sync layer refusing calls without a token in its `before`.
struct SyncAuth;

impl Layer for SyncAuth {
    fn before(&self, req: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        (req.header("authorization") != Some(b"Bearer good"))
            .then(|| Response::text("sync says no").status(401))
    }
}

#[test]
fn a_sync_layers_early_answer_on_a_grpc_route_is_a_grpc_status_too() {
    // A group's layer (on the route) and the router's (before routing).
    let grouped = Router::new().group(|g| g.grpc(Sums(Arc::default())).layer(SyncAuth));
    let whole = Router::new().grpc(Sums(Arc::default())).layer(SyncAuth);
    for router in [grouped, whole] {
        let c = TestClient::new(router).http2();
        let r = call(&c, ADD, frames(&[ab(1, 1)]), &[]);
        assert_trailers_only(&r, Code::Unauthenticated, "sync layer");
        assert_eq!(status(&r).1.as_deref(), Some("sync says no"));
        let r = call(
            &c,
            ADD,
            frames(&[ab(1, 1)]),
            &[("authorization", "Bearer good")],
        );
        assert_eq!(replies(r.body()), vec![2]);
    }
}

#[test]
fn a_grpc_routes_timeout_ends_the_call_deadline_exceeded_and_the_shorter_deadline_wins() {
    let router = Router::new()
        .grpc(Sums(Arc::default()))
        .timeout(Duration::from_millis(50));
    let c = TestClient::new(router).http2();
    // The route's timeout, shorter than the call's own.
    let r = call(&c, SLOW, frames(&[ab(0, 10_000)]), &[]);
    assert_trailers_only(&r, Code::DeadlineExceeded, "route timeout");
    // The client's grpc-timeout, shorter than the route's.
    let long = Router::new()
        .grpc(Sums(Arc::default()))
        .timeout(Duration::from_secs(60));
    let c = TestClient::new(long).http2();
    let r = call(
        &c,
        SLOW,
        frames(&[ab(0, 10_000)]),
        &[("grpc-timeout", "20m")],
    );
    assert_trailers_only(&r, Code::DeadlineExceeded, "grpc-timeout");
    // A call within both: answered.
    let r = call(&c, SLOW, frames(&[ab(0, 1)]), &[("grpc-timeout", "10S")]);
    assert_eq!(status(&r).0, "0");
}

/// A streaming method's future outlives its answer unless the route timeout gives the call
/// up: the timeout answered DEADLINE_EXCEEDED, and the future (which awaits an hour) is
/// dropped then, not when the hour is over.
#[test]
fn a_route_timeout_on_a_streaming_grpc_method_drops_its_future() {
    let router = Router::new()
        .grpc(Sums(Arc::default()))
        .timeout(Duration::from_millis(20));
    let c = TestClient::new(router).http2();
    let r = call(&c, HANG, frames(&[ab(1, 2)]), &[]);
    assert_trailers_only(&r, Code::DeadlineExceeded, "route timeout on a stream");
    // Bounded wait for the drop (a bound on a hang, not a measurement).
    for _ in 0..500 {
        if HANG_DROPPED.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        HANG_DROPPED.load(Ordering::SeqCst),
        "the call's future still runs"
    );
}

/// A unary call under an async layer reads its body after the layers: a first prefix over
/// the message limit is RESOURCE_EXHAUSTED as it arrives, as without a layer.
#[test]
fn a_unary_calls_body_over_the_message_limit_under_an_async_layer_is_resource_exhausted() {
    let calls = Arc::new(AtomicUsize::new(0));
    let router = Router::new().grpc(Sums(calls.clone())).around(gate);
    let c = TestClient::new(router).http2();
    let mut body = vec![0u8];
    body.extend_from_slice(&((grpc::MAX_MESSAGE as u32) + 1).to_be_bytes());
    body.extend_from_slice(&[0; 64]);
    let r = call(&c, ADD, body, &[]);
    assert_trailers_only(&r, Code::ResourceExhausted, "over the limit");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    // Two messages in a unary call: INTERNAL, from the method's own reading.
    let r = call(&c, ADD, frames(&[ab(1, 1), ab(2, 2)]), &[]);
    assert_trailers_only(&r, Code::Internal, "two messages");
}

/// Counts the requests its `before` sees.
struct Counted(Arc<AtomicUsize>);

impl Layer for Counted {
    fn before(&self, _: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Some(Response::text("layer").status(401))
    }
}

#[test]
fn route_layer_wraps_the_routes_registered_before_it_only_never_the_servers_404_or_405() {
    let seen = Arc::new(AtomicUsize::new(0));
    let router = Router::new()
        .get("/a", |_| "a")
        .route_layer(Counted(seen.clone()))
        .get("/b", |_| "b");
    let c = TestClient::new(router);
    assert_eq!(c.get("/a").send().status(), 401);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
    let r = c.get("/b").send();
    assert_eq!((r.status(), r.text().as_str()), (200, "b"));
    assert_eq!(c.get("/nope").send().status(), 404);
    assert_eq!(c.delete("/a").send().status(), 405);
    assert_eq!(
        seen.load(Ordering::SeqCst),
        1,
        "only /a passed the route layer"
    );
}

// ---- backpressure on a real server ----

/// Held until the test lets it go: what the layer awaits.
static RELEASED: AtomicBool = AtomicBool::new(false);

async fn held(req: OwnedRequest, next: Next) -> Response {
    let mut turns = 0;
    while !RELEASED.load(Ordering::SeqCst) && turns < 20_000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        turns += 1;
    }
    next.run(req).await
}

#[test]
fn a_streaming_upload_under_an_awaiting_layer_is_not_buffered_without_bound() {
    use std::io::{ErrorKind, Read, Write};
    const TOTAL: usize = 256 << 20;
    let mut config = TestServer::config();
    config.max_stream_body_bytes = TOTAL as u64;
    let router = Router::new()
        .streaming(Method::Post, "/up", |_| Box::new(Count(0)))
        .around(held);
    let server = TestServer::start_with(config, router).unwrap();
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    let head = format!("POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: {TOTAL}\r\n\r\n");
    s.write_all(head.as_bytes()).unwrap();
    // Writes until the socket takes no more for a while: the server reads no further than
    // the body's room while the layer waits (buffered without bound, all of it would go).
    s.set_write_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let piece = vec![b'u'; 64 * 1024];
    let mut sent = 0;
    while sent < TOTAL {
        match s.write(&piece[..piece.len().min(TOTAL - sent)]) {
            Ok(n) => sent += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => break,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        sent < TOTAL / 4,
        "{sent} of {TOTAL} bytes taken while the layer waited"
    );
    RELEASED.store(true, Ordering::SeqCst);
    s.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    while sent < TOTAL {
        sent += s.write(&piece[..piece.len().min(TOTAL - sent)]).unwrap();
    }
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    while !String::from_utf8_lossy(&got).contains(&format!("streamed {TOTAL}")) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    drop(s);
    server.stop().unwrap();
}

/// Refuses every request in its `before`: a sync layer's early answer.
struct Deny;

impl Layer for Deny {
    fn before(&self, _: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        Some(Response::text("no token\n").status(401))
    }
}

/// How [`upload_then_get`] sends its upload.
#[derive(Clone, Copy, Debug)]
enum Upload {
    /// Head, body and the GET after it in one write: a short body is in the server's buffer
    /// with its head (one loopback segment, read by one receive on either backend).
    Together,
    /// The head alone; the body and the GET only once an answer has begun: the body is
    /// still coming when the server answers, whatever its size.
    BodyAfterAnswer,
}

/// An HTTP/1.1 upload of `len` bytes to `/up`, then a GET on the same connection; what came
/// back (status lines in order) until the server closed or 5 s passed. How the bytes are
/// written decides whether the body is in with its head: a head and a body written apart
/// may be read apart or together, which the server's answer depends on (RFC 9112 §9.6).
fn upload_then_get(addr: std::net::SocketAddr, len: usize, send: Upload) -> Vec<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let head = format!("POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: {len}\r\n\r\n");
    let mut rest = vec![b'u'; len];
    rest.extend_from_slice(b"GET /ok HTTP/1.1\r\nhost: x\r\n\r\n");
    let (answered_tx, answered_rx) = std::sync::mpsc::channel::<()>();
    let writer = {
        let mut s = s.try_clone().unwrap();
        std::thread::spawn(move || match send {
            Upload::Together => {
                let mut all = head.into_bytes();
                all.extend_from_slice(&rest);
                let _ = s.write_all(&all);
            }
            Upload::BodyAfterAnswer => {
                let _ = s.write_all(head.as_bytes());
                if answered_rx.recv_timeout(Duration::from_secs(5)).is_ok() {
                    let _ = s.write_all(&rest);
                }
            }
        })
    };
    let mut got = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let _ = answered_tx.send(());
        if String::from_utf8_lossy(&got).contains("\r\n\r\nok") {
            break;
        }
    }
    drop(answered_tx);
    drop(s);
    let _ = writer.join();
    String::from_utf8_lossy(&got)
        .lines()
        .filter(|l| l.starts_with("HTTP/1.1 "))
        .map(str::to_string)
        .collect()
}

/// RFC 9112 §9.6: an answer before the body is read leaves the connection to read the body
/// and throw it away, or to close. A layer that answers 401 at the head of a streaming
/// route, async or sync, leaves the connection doing the same thing: the handler's end of the
/// body is dropped either way. A body in with its head is skipped and the GET behind it
/// answered; one still coming (sent only after the answer began, or larger than a receive)
/// closes the connection after the 401.
#[test]
fn an_async_layers_early_answer_on_a_streaming_route_leaves_the_connection_as_a_sync_layers_does() {
    async fn deny(_: OwnedRequest, _: Next) -> Response {
        Response::text("no token\n").status(401)
    }
    let sync = || {
        Router::new()
            .streaming(Method::Post, "/up", |_| Box::new(Count(0)))
            .route_layer(Deny)
            .get("/ok", |_| "ok")
    };
    let around = || {
        Router::new()
            .group(|g| {
                g.streaming(Method::Post, "/up", |_| Box::new(Count(0)))
                    .around(deny)
            })
            .get("/ok", |_| "ok")
    };
    let cases: [(usize, Upload, &[&str]); 3] = [
        (
            1_000,
            Upload::Together,
            &["HTTP/1.1 401 Unauthorized", "HTTP/1.1 200 OK"],
        ),
        (
            1_000,
            Upload::BodyAfterAnswer,
            &["HTTP/1.1 401 Unauthorized"],
        ),
        (4 << 20, Upload::Together, &["HTTP/1.1 401 Unauthorized"]),
    ];
    for (len, send, want) in cases {
        for (kind, router) in [("sync", sync()), ("async", around())] {
            let server = TestServer::start(router).unwrap();
            let seen = upload_then_get(server.addr(), len, send);
            server.stop().unwrap();
            assert_eq!(seen, want, "{len} bytes, {send:?}, {kind} layer");
        }
    }
}

/// Held until the HTTP/2 test lets it go (apart from [`RELEASED`]: tests run at once).
static RELEASED_H2: AtomicBool = AtomicBool::new(false);

async fn held_h2(req: OwnedRequest, next: Next) -> Response {
    let mut turns = 0;
    while !RELEASED_H2.load(Ordering::SeqCst) && turns < 20_000 {
        tokio::time::sleep(Duration::from_millis(1)).await;
        turns += 1;
    }
    next.run(req).await
}

/// The same over HTTP/2 (hyperium's h2 client, prior knowledge): while the layer waits, the
/// server's flow control grants the upload no more than its room and windows.
#[test]
fn a_streaming_upload_over_http2_under_an_awaiting_layer_is_held_by_flow_control() {
    use bytes::Bytes;
    const TOTAL: usize = 64 << 20;
    let mut config = TestServer::config();
    config.max_stream_body_bytes = TOTAL as u64;
    let router = Router::new()
        .streaming(Method::Post, "/up", |_| Box::new(Count(0)))
        .around(held_h2);
    let server = TestServer::start_with(config, router).unwrap();
    let addr = server.addr();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (sent_while_held, text) = rt.block_on(async move {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (client, conn) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let mut client = client.ready().await.unwrap();
        let req = http::Request::post(format!("http://{addr}/up"))
            .header("content-length", TOTAL.to_string())
            .body(())
            .unwrap();
        let (resp, mut stream) = client.send_request(req, false).unwrap();
        let mut sent = 0;
        let mut held = None;
        let piece = Bytes::from(vec![b'u'; 64 * 1024]);
        while sent < TOTAL {
            stream.reserve_capacity(piece.len().min(TOTAL - sent));
            // No capacity for a while: the server stopped granting it (a bound, not a figure).
            let wait = if held.is_none() { 500 } else { 30_000 };
            let capacity = std::future::poll_fn(|cx| stream.poll_capacity(cx));
            match tokio::time::timeout(Duration::from_millis(wait), capacity).await {
                Ok(Some(Ok(0))) => continue,
                Ok(Some(Ok(n))) => {
                    let n = n.min(TOTAL - sent);
                    sent += n;
                    stream.send_data(piece.slice(..n), sent == TOTAL).unwrap();
                }
                Ok(other) => panic!("{other:?}"),
                Err(_) if held.is_none() => {
                    held = Some(sent);
                    RELEASED_H2.store(true, Ordering::SeqCst);
                }
                Err(_) => panic!("no capacity after the layer let go ({sent} sent)"),
            }
        }
        // Never held (all of it granted while the layer waited): let it go, to say so below.
        RELEASED_H2.store(true, Ordering::SeqCst);
        let resp = tokio::time::timeout(Duration::from_secs(30), resp)
            .await
            .unwrap()
            .unwrap();
        let mut body = resp.into_body();
        let mut got = Vec::new();
        while let Some(piece) = body.data().await {
            let piece = piece.unwrap();
            let _ = body.flow_control().release_capacity(piece.len());
            got.extend_from_slice(&piece);
        }
        (held, String::from_utf8_lossy(&got).into_owned())
    });
    let held = sent_while_held.expect("the upload was never held");
    assert!(
        held < TOTAL / 4,
        "{held} of {TOTAL} bytes granted while the layer waited"
    );
    assert_eq!(text, format!("streamed {TOTAL}"));
    server.stop().unwrap();
}

/// A tower layer is an async layer in all but its trait (`Router::tower_layer`), so it covers
/// gRPC routes as `around` does: tower-http's bearer check (what a tonic team puts over its
/// services as a tower layer) refuses a call UNAUTHENTICATED, trailers-only, and lets a good
/// one through to unary, client-streaming and server-streaming methods alike.
#[cfg(feature = "tower")]
#[test]
fn a_tower_auth_layer_over_grpc_routes_passes_or_ends_the_call_unauthenticated() {
    use tower_http::validate_request::ValidateRequestHeaderLayer;
    let calls = Arc::new(AtomicUsize::new(0));
    #[allow(deprecated)] // `bearer` is tower-http's own, deprecated for custom validators only
    let auth = ValidateRequestHeaderLayer::bearer("good");
    let router = Router::new().grpc(Sums(calls.clone())).tower_layer(auth);
    let c = TestClient::new(router).http2();
    let good = [("authorization", "Bearer good")];
    let r = call(&c, ADD, frames(&[ab(2, 3)]), &good);
    assert_eq!((status(&r).0.as_str(), replies(r.body())), ("0", vec![5]));
    let r = call(&c, TOTAL, frames(&[ab(1, 2), ab(3, 4)]), &good);
    assert_eq!((status(&r).0.as_str(), replies(r.body())), ("0", vec![10]));
    let r = call(&c, COUNT_UP, frames(&[ab(3, 0)]), &good);
    assert_eq!(
        (status(&r).0.as_str(), replies(r.body())),
        ("0", vec![1, 2, 3])
    );
    for path in [ADD, TOTAL, COUNT_UP] {
        let r = call(
            &c,
            path,
            frames(&[ab(1, 1)]),
            &[("authorization", "Bearer bad")],
        );
        assert_trailers_only(&r, Code::Unauthenticated, path);
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3,
        "no handler ran for a refused call"
    );
}

/// A gRPC call that the worker refuses because `max_deferred_per_worker` calls are waiting
/// already is a gRPC answer, RESOURCE_EXHAUSTED trailers-only, under async layers as under
/// none, not the HTTP 503 an HTTP request gets (grpc-go and grpcio read a 503 without
/// grpc-status as UNAVAILABLE "unexpected HTTP status", and the lab's load counted it as
/// an HTTP error); the REST route under the same layer keeps its 503.
#[test]
fn a_grpc_call_over_the_waiting_cap_under_an_async_layer_is_resource_exhausted() {
    let config = linerate_server::Config {
        max_deferred_per_worker: 0,
        ..linerate_server::Config::default()
    };
    let router = Router::new()
        .get_async("/rest", OnWorker, |_| async { "rest" })
        .grpc(Sums(Arc::default()))
        .around(bearer);
    let c = TestClient::with_config(config, router)
        .expect("starts")
        .http2();
    let r = call(
        &c,
        ADD,
        frames(&[ab(2, 3)]),
        &[("authorization", "Bearer good")],
    );
    assert_trailers_only(&r, Code::ResourceExhausted, "over the cap");
    let r = c.get("/rest").header("authorization", "Bearer good").send();
    assert_eq!(r.status(), 503);
}
