//! tower layers on native routes, through the in-process test client over
//! HTTP/1.1 and HTTP/2 framing: tower-http's compression (gzip readable, `Vary`; a streamed
//! answer too), timeout (the handler's future dropped, tower-http's status), request body
//! limit (413 declared and chunked), set-header (answer and request), bearer validation
//! (401, 200), an async authorization layer handing its user to the handler, and trace (a
//! span per request) on sync and `async` handlers; routes outside
//! the tower group untouched; the order against async layers; the handler's fields, body,
//! extensions and trailers through a layer; a body a layer inflates past
//! `MAX_LAYERED_BODY_BYTES` (413); HEAD; a file answer and a streamed one with trailers
//! through a layer; and one answer read by Debian's curl.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::{HeaderName, HeaderValue, StatusCode};
use linerate_server::testing::{Protocol, TestClient, TestResponse, TestServer};
use linerate_server::{
    Config, Extensions, Layer, Next, OnWorker, OwnedRequest, Request, Response, Router,
};
use tower_http::auth::AsyncRequireAuthorizationLayer;
use tower_http::compression::CompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::set_header::{SetRequestHeaderLayer, SetResponseHeaderLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;
use tower_http::validate_request::ValidateRequestHeaderLayer;

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

/// A body long enough for tower-http's compression (it skips bodies under 32 bytes).
fn page() -> String {
    "linerate serves this line under a tower layer.\n".repeat(40)
}

fn gunzip(body: &[u8]) -> String {
    let mut out = String::new();
    flate2::read::GzDecoder::new(body)
        .read_to_string(&mut out)
        .expect("a gzip body");
    out
}

fn get(client: &TestClient, protocol: Protocol, path: &str) -> TestResponse {
    client.get(path).protocol(protocol).send()
}

/// A configuration without linerate's own compression, so that a compressed answer can
/// only be the tower layer's.
fn uncompressed() -> Config {
    let mut config = TestServer::config();
    config.compression.enabled = false;
    config
}

#[test]
fn compression_layer_gzips_a_native_answer_with_vary() {
    let client = TestClient::with_config(
        uncompressed(),
        Router::new()
            .get("/page", |_| Response::text_owned(page()))
            .get_async("/page-async", OnWorker, |_| async {
                Response::text_owned(page())
            })
            .tower_layer(CompressionLayer::new()),
    )
    .expect("client starts");
    for protocol in PROTOCOLS {
        for path in ["/page", "/page-async"] {
            let resp = client
                .get(path)
                .header("Accept-Encoding", "gzip")
                .protocol(protocol)
                .send();
            assert_eq!(resp.status(), 200, "{protocol:?} {path}");
            assert_eq!(
                resp.header("content-encoding"),
                Some("gzip"),
                "{protocol:?} {path}"
            );
            assert!(
                resp.header("vary")
                    .is_some_and(|v| v.to_ascii_lowercase().contains("accept-encoding")),
                "{protocol:?} {path}: {:?}",
                resp.headers()
            );
            assert_eq!(resp.header("content-type"), Some("text/plain"));
            assert_eq!(gunzip(resp.body()), page(), "{protocol:?} {path}");
            // A client that asks for no coding gets the body as it is.
            let plain = get(&client, protocol, path);
            assert_eq!(
                plain.header("content-encoding"),
                None,
                "{protocol:?} {path}"
            );
            assert_eq!(plain.text(), page(), "{protocol:?} {path}");
        }
    }
}

#[test]
fn a_streamed_answer_is_compressed_as_it_is_written() {
    let lines = 200;
    let client = TestClient::new(
        Router::new()
            .get("/stream", move |_| {
                let (resp, writer) = Response::new(200).content_type("text/plain").stream();
                std::thread::spawn(move || {
                    for i in 0..lines {
                        if writer.wait_room().is_err() {
                            return;
                        }
                        let _ = writer.write(format!("line {i} of a streamed answer\n"));
                    }
                    writer.end();
                });
                resp
            })
            .tower_layer(CompressionLayer::new()),
    );
    let want: String = (0..lines)
        .map(|i| format!("line {i} of a streamed answer\n"))
        .collect();
    for protocol in PROTOCOLS {
        let resp = client
            .get("/stream")
            .header("Accept-Encoding", "gzip")
            .protocol(protocol)
            .send();
        assert_eq!(resp.status(), 200, "{protocol:?}");
        assert_eq!(
            resp.header("content-encoding"),
            Some("gzip"),
            "{protocol:?}"
        );
        assert_eq!(gunzip(resp.body()), want, "{protocol:?}");
    }
}

/// Sets its flag when dropped: whether a handler's future was dropped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn timeout_layer_drops_the_handlers_future_and_answers_its_status() {
    for protocol in PROTOCOLS {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let client = TestClient::new(
            Router::new()
                .get_async("/slow", OnWorker, move |_| {
                    let guard = Dropped(flag.clone());
                    async move {
                        let _guard = guard;
                        tokio::time::sleep(Duration::from_secs(30)).await;
                        "too late"
                    }
                })
                .get("/fast", |_| "in time")
                .tower_layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    Duration::from_millis(50),
                )),
        );
        let resp = get(&client, protocol, "/slow");
        assert_eq!(resp.status(), 408, "{protocol:?}: tower-http's status");
        // The drop happens on the worker's runtime; wait for it, bounded.
        let start = Instant::now();
        while !dropped.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "{protocol:?}: the future was not dropped"
        );
        let resp = get(&client, protocol, "/fast");
        assert_eq!((resp.status(), resp.text().as_str()), (200, "in time"));
    }
}

/// `body` as one chunk of a chunked body, for HTTP/1.1.
fn chunked(body: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n0\r\n\r\n");
    out
}

#[test]
fn request_body_limit_layer_refuses_a_body_over_it_413_declared_or_not() {
    let client = TestClient::new(
        Router::new()
            .post("/echo", |req: &Request<'_>| {
                Response::new(200).body(linerate_server::Body::Owned(req.body().to_vec()))
            })
            .tower_layer(RequestBodyLimitLayer::new(16)),
    );
    for protocol in PROTOCOLS {
        let small = client
            .post("/echo")
            .body("twelve bytes")
            .protocol(protocol)
            .send();
        assert_eq!(
            (small.status(), small.text().as_str()),
            (200, "twelve bytes")
        );
        // Declared (Content-Length): the layer answers itself.
        let big = client
            .post("/echo")
            .body(vec![b'x'; 100])
            .protocol(protocol)
            .send();
        assert_eq!(big.status(), 413, "{protocol:?} declared");
        // Not declared (chunked on HTTP/1.1, DATA without content-length on HTTP/2): the
        // limited body fails as the route's service reads it.
        let body = vec![b'y'; 100];
        let sent = match protocol {
            Protocol::Http1 => chunked(&body),
            _ => body,
        };
        let big = client
            .post("/echo")
            .header("Transfer-Encoding", "chunked")
            .body(sent)
            .protocol(protocol)
            .send();
        assert_eq!(big.status(), 413, "{protocol:?} undeclared");
    }
}

#[test]
fn set_header_layers_reach_the_answer_and_the_handler() {
    let client = TestClient::new(
        Router::new()
            .get("/who", |req: &Request<'_>| {
                let tag = req
                    .header("x-tag")
                    .map(|v| String::from_utf8_lossy(v).into_owned());
                Response::text_owned(tag.unwrap_or_else(|| "none".into()))
            })
            .tower_layer(SetResponseHeaderLayer::overriding(
                HeaderName::from_static("x-frame-options"),
                HeaderValue::from_static("DENY"),
            ))
            .tower_layer(SetRequestHeaderLayer::if_not_present(
                HeaderName::from_static("x-tag"),
                HeaderValue::from_static("set-by-a-tower-layer"),
            )),
    );
    for protocol in PROTOCOLS {
        let resp = get(&client, protocol, "/who");
        assert_eq!(resp.header("x-frame-options"), Some("DENY"), "{protocol:?}");
        assert_eq!(resp.text(), "set-by-a-tower-layer", "{protocol:?}");
        let own = client
            .get("/who")
            .header("X-Tag", "mine")
            .protocol(protocol)
            .send();
        assert_eq!(own.text(), "mine", "{protocol:?}");
    }
}

#[test]
// tower-http deprecates `bearer` (0.6.7, "too basic"); it is still what many services use.
#[allow(deprecated)]
fn validate_request_header_bearer_answers_401_without_the_token() {
    let client = TestClient::new(
        Router::new()
            .get("/secret", |_| "the secret")
            .get_async("/secret-async", OnWorker, |_| async { "the async secret" })
            .tower_layer(ValidateRequestHeaderLayer::bearer("s3cret")),
    );
    for protocol in PROTOCOLS {
        for (path, body) in [
            ("/secret", "the secret"),
            ("/secret-async", "the async secret"),
        ] {
            let none = get(&client, protocol, path);
            assert_eq!(none.status(), 401, "{protocol:?} {path}");
            assert_ne!(none.text(), body);
            let wrong = client
                .get(path)
                .header("Authorization", "Bearer nope")
                .protocol(protocol)
                .send();
            assert_eq!(wrong.status(), 401, "{protocol:?} {path}");
            let ok = client
                .get(path)
                .header("Authorization", "Bearer s3cret")
                .protocol(protocol)
                .send();
            assert_eq!(
                (ok.status(), ok.text().as_str()),
                (200, body),
                "{protocol:?} {path}"
            );
        }
    }
}

#[test]
fn trace_layer_makes_a_span_per_request() {
    let spans = Arc::new(AtomicUsize::new(0));
    let responses = Arc::new(AtomicUsize::new(0));
    let (s, r) = (spans.clone(), responses.clone());
    let trace = TraceLayer::new_for_http()
        .make_span_with(move |req: &http::Request<_>| {
            s.fetch_add(1, Ordering::SeqCst);
            tracing::info_span!("request", path = %req.uri().path())
        })
        .on_response(
            move |resp: &http::Response<_>, _: Duration, _: &tracing::Span| {
                assert_eq!(resp.status(), StatusCode::OK);
                r.fetch_add(1, Ordering::SeqCst);
            },
        );
    let client = TestClient::new(Router::new().get("/t", |_| "traced").tower_layer(trace));
    for protocol in PROTOCOLS {
        for _ in 0..3 {
            assert_eq!(get(&client, protocol, "/t").text(), "traced");
        }
    }
    assert_eq!(spans.load(Ordering::SeqCst), 6);
    assert_eq!(responses.load(Ordering::SeqCst), 6);
}

#[test]
// tower-http's custom validator returns `Result<(), http::Response<_>>`: its shape, not ours.
#[allow(clippy::result_large_err)]
fn a_route_outside_the_tower_group_is_untouched() {
    let client = TestClient::new(
        Router::new()
            .get("/outside", |_| Response::text_owned(page()))
            .group(|g| {
                g.get("/inside", |_| Response::text_owned(page()))
                    .tower_layer(SetResponseHeaderLayer::overriding(
                        HeaderName::from_static("x-layered"),
                        HeaderValue::from_static("yes"),
                    ))
                    .tower_layer(ValidateRequestHeaderLayer::custom(
                        |req: &mut http::Request<_>| match req.headers().get("x-key") {
                            Some(_) => Ok(()),
                            None => Err(http::Response::builder()
                                .status(StatusCode::FORBIDDEN)
                                .body(Default::default())
                                .unwrap()),
                        },
                    ))
            }),
    );
    for protocol in PROTOCOLS {
        let inside = get(&client, protocol, "/inside");
        assert_eq!(inside.status(), 403, "{protocol:?}");
        let inside = client
            .get("/inside")
            .header("X-Key", "k")
            .protocol(protocol)
            .send();
        assert_eq!(inside.header("x-layered"), Some("yes"), "{protocol:?}");
        let outside = get(&client, protocol, "/outside");
        assert_eq!(outside.status(), 200, "{protocol:?}");
        assert_eq!(outside.header("x-layered"), None, "{protocol:?}");
        assert_eq!(outside.text(), page());
    }
}

/// An async layer appending `around` to `x-order` on the way out.
async fn around(req: OwnedRequest, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let was = resp.field("x-order").unwrap_or("").to_string();
    let now = if was.is_empty() {
        "around".to_string()
    } else {
        format!("{was}, around")
    };
    resp.set_header("x-order", now).unwrap();
    resp
}

/// A tower layer appending `tower` to `x-order` on the way out.
fn tower_tag() -> SetResponseHeaderLayer<HeaderValue> {
    SetResponseHeaderLayer::appending(
        HeaderName::from_static("x-order"),
        HeaderValue::from_static("tower"),
    )
}

#[test]
fn the_last_layer_added_is_outermost_across_tower_and_async_layers() {
    // Tower layer first (inner), async layer last (outer): the tower layer sees the answer
    // first.
    let tower_inside = TestClient::new(
        Router::new()
            .get("/o", |_| "o")
            .tower_layer(tower_tag())
            .around(around),
    );
    // The other way round.
    let tower_outside = TestClient::new(
        Router::new()
            .get("/o", |_| "o")
            .around(around)
            .tower_layer(tower_tag()),
    );
    for protocol in PROTOCOLS {
        let resp = get(&tower_inside, protocol, "/o");
        assert_eq!(
            resp.header("x-order"),
            Some("tower, around"),
            "{protocol:?}"
        );
        let resp = get(&tower_outside, protocol, "/o");
        let got: Vec<_> = resp
            .headers()
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("x-order"))
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(got, ["around", "tower"], "{protocol:?}");
    }
}

/// A sync layer attaching a value for the handler.
struct Tag;

struct Tagged(&'static str);

impl Layer for Tag {
    fn before(&self, _: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        ext.insert(Tagged("from a sync layer"));
        None
    }
}

#[test]
fn the_handler_sees_its_parameters_body_extensions_and_the_layers_http_extensions() {
    let client = TestClient::new(
        Router::new()
            .post("/items/{id}", |req: &Request<'_>| {
                let id = req.param("id").unwrap_or("?").to_string();
                let tag = req.extension::<Tagged>().map_or("none", |t| t.0);
                let uri = req
                    .extension::<http::Extensions>()
                    .and_then(|e| e.get::<linerate_server::tower::OriginalUri>())
                    .map_or("none".to_string(), |u| u.0.path().to_string());
                let body = String::from_utf8_lossy(req.body()).into_owned();
                format!("{id} {tag} {uri} {body}")
            })
            .tower_layer(CompressionLayer::new())
            .layer(Tag),
    );
    for protocol in PROTOCOLS {
        let resp = client
            .post("/items/7?x=1")
            .body("payload")
            .protocol(protocol)
            .send();
        assert_eq!(
            resp.text(),
            "7 from a sync layer /items/7 payload",
            "{protocol:?}"
        );
    }
}

#[test]
fn trailers_and_close_of_a_native_answer_pass_through_a_tower_layer() {
    let client = TestClient::new(
        Router::new()
            .get("/t", |_| {
                Response::text("with trailers").trailer("x-checksum", "42")
            })
            .get("/bye", |_| Response::text("closing").close())
            .tower_layer(tower_tag()),
    );
    for protocol in PROTOCOLS {
        let resp = get(&client, protocol, "/t");
        assert_eq!(resp.text(), "with trailers", "{protocol:?}");
        assert_eq!(resp.trailer("x-checksum"), Some("42"), "{protocol:?}");
        assert_eq!(resp.header("x-order"), Some("tower"), "{protocol:?}");
    }
    let resp = get(&client, Protocol::Http1, "/bye");
    assert_eq!(resp.header("x-order"), Some("tower"));
    assert_eq!(resp.header("connection"), Some("close"));
}

#[test]
fn curl_reads_a_compressed_answer_of_a_native_route() {
    let curl = std::process::Command::new("curl").arg("--version").output();
    if !curl.is_ok_and(|o| o.status.success()) {
        println!("NOT RUN: curl is not installed");
        return;
    }
    let server = TestServer::start_with(
        uncompressed(),
        Router::new()
            .get("/page", |_| Response::text_owned(page()))
            .tower_layer(CompressionLayer::new()),
    )
    .expect("server starts");
    let out = std::process::Command::new("curl")
        // gzip only: tower-http also offers br (the workspace enables it), and curl asks for
        // both with --compressed alone.
        .args(["-sS", "--compressed", "-H", "Accept-Encoding: gzip"])
        .args(["-D", "-", "--max-time", "20"])
        .arg(server.url("/page"))
        .output()
        .expect("curl runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let (head, body) = text.split_once("\r\n\r\n").expect("a head and a body");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("vary: accept-encoding"), "{head}");
    assert_eq!(body, page());
    server.stop().expect("server stops");
}

/// Who an async authorization layer found the caller to be.
#[derive(Clone)]
struct UserId(u32);

#[test]
// tower-http's authorizer returns `Result<http::Request<_>, http::Response<_>>`: its shape.
#[allow(clippy::result_large_err)]
fn an_async_authorization_layer_hands_the_user_it_found_to_the_handler() {
    let auth = AsyncRequireAuthorizationLayer::new(
        |mut req: http::Request<linerate_server::tower::Body>| async move {
            // A lookup that waits, as a session store's would.
            tokio::time::sleep(Duration::from_millis(1)).await;
            let token = req.headers().get("authorization").map(|v| v.as_bytes());
            if token == Some(b"Bearer seven".as_slice()) {
                req.extensions_mut().insert(UserId(7));
                return Ok(req);
            }
            Err(http::Response::builder()
                .status(StatusCode::UNAUTHORIZED)
                .body(linerate_server::tower::Body::default())
                .unwrap())
        },
    );
    let client = TestClient::new(
        Router::new()
            .get("/me", |req: &Request<'_>| {
                let user = req
                    .extension::<http::Extensions>()
                    .and_then(|e| e.get::<UserId>())
                    .map_or(0, |u| u.0);
                format!("user {user}")
            })
            .tower_layer(auth),
    );
    for protocol in PROTOCOLS {
        assert_eq!(get(&client, protocol, "/me").status(), 401, "{protocol:?}");
        let ok = client
            .get("/me")
            .header("Authorization", "Bearer seven")
            .protocol(protocol)
            .send();
        assert_eq!(
            (ok.status(), ok.text().as_str()),
            (200, "user 7"),
            "{protocol:?}"
        );
    }
}

/// A tower layer that hands the route a body of `self.0` bytes, whatever came: what a
/// request decompression layer does with a small compressed body that inflates.
#[derive(Clone)]
struct Inflate(usize);

#[derive(Clone)]
struct Inflated<S>(S, usize);

impl<S> tower_layer::Layer<S> for Inflate {
    type Service = Inflated<S>;
    fn layer(&self, inner: S) -> Inflated<S> {
        Inflated(inner, self.0)
    }
}

impl<S, B> tower_service::Service<http::Request<B>> for Inflated<S>
where
    S: tower_service::Service<http::Request<Zeros>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        let n = self.1;
        self.0.call(req.map(|_| Zeros(n)))
    }
}

/// `self.0` zero bytes, 1 MiB a frame.
struct Zeros(usize);

impl http_body::Body for Zeros {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        let n = self.0.min(1 << 20);
        self.0 -= n;
        std::task::Poll::Ready((n > 0).then(|| Ok(http_body::Frame::data(vec![0; n].into()))))
    }
}

#[test]
fn a_body_a_layer_inflates_past_the_layered_limit_is_refused_413() {
    let limit = linerate_server::tower::MAX_LAYERED_BODY_BYTES;
    let length = |req: &Request<'_>| req.body().len().to_string();
    let client = TestClient::new(
        Router::new()
            .group(|g| g.post("/fits", length).tower_layer(Inflate(limit)))
            .group(|g| g.post("/over", length).tower_layer(Inflate(limit + 1))),
    );
    let fits = client.post("/fits").body("small").send();
    assert_eq!((fits.status(), fits.text()), (200, limit.to_string()));
    let over = client.post("/over").body("small").send();
    assert_eq!(over.status(), 413);
}

#[test]
fn a_head_request_through_a_tower_layer_gets_the_head_only() {
    let client = TestClient::new(
        Router::new()
            .get("/page", |_| Response::text_owned(page()))
            .tower_layer(tower_tag()),
    );
    for protocol in PROTOCOLS {
        let resp = client.head("/page").protocol(protocol).send();
        assert_eq!(resp.status(), 200, "{protocol:?}");
        assert_eq!(resp.header("x-order"), Some("tower"), "{protocol:?}");
        assert!(resp.body().is_empty(), "{protocol:?}");
        let len = page().len().to_string();
        assert_eq!(
            resp.header("content-length"),
            Some(len.as_str()),
            "{protocol:?}"
        );
    }
}

#[test]
fn a_file_answer_and_a_streamed_answers_trailers_pass_through_a_tower_layer() {
    let path = std::env::temp_dir().join(format!("tower-layers-{}.txt", std::process::id()));
    let content = page();
    std::fs::write(&path, &content).expect("temp file written");
    let file = Arc::new(std::os::fd::OwnedFd::from(
        std::fs::File::open(&path).expect("temp file opens"),
    ));
    std::fs::remove_file(&path).expect("temp file removed");
    let client = TestClient::new(
        Router::new()
            .get("/file", move |_| {
                // The range from byte 10 on, as a file answer (sendfile without a layer).
                let body = linerate_server::FileBody {
                    file: file.clone(),
                    offset: 10,
                    len: (page().len() - 10) as u64,
                };
                Response::new(200).body(linerate_server::Body::File(body))
            })
            .get("/stream", |_| {
                let (resp, writer) = Response::new(200).stream();
                std::thread::spawn(move || {
                    let _ = writer.write("streamed");
                    let trailers = vec![("x-sum".into(), "8".into())];
                    writer.end_with_trailers(trailers).expect("a valid trailer");
                });
                resp
            })
            .tower_layer(tower_tag()),
    );
    for protocol in PROTOCOLS {
        let resp = get(&client, protocol, "/file");
        assert_eq!(resp.header("x-order"), Some("tower"), "{protocol:?}");
        assert_eq!(resp.text(), content[10..], "{protocol:?}");
        let resp = get(&client, protocol, "/stream");
        assert_eq!(resp.header("x-order"), Some("tower"), "{protocol:?}");
        assert_eq!(resp.text(), "streamed", "{protocol:?}");
        assert_eq!(resp.trailer("x-sum"), Some("8"), "{protocol:?}");
    }
}
