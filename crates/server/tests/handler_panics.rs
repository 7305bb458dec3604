//! Handlers that panic, as a client sees them and as `/metrics` counts them: a gRPC method's
//! panic ends its call INTERNAL (as a tonic service's), or the code
//! `Router::grpc_panic_status` sets, whatever the method's kind and whether it answered at
//! once, later, or under an async layer; a REST handler's panic is a 500 that an
//! `ErrorRenderer` renders in its own shape; both counted in `linerate_handler_panics_total`.

use linerate_grpc::proto::grpc::health::v1::{HealthCheckRequest, HealthCheckResponse};
use linerate_server::grpc::client::Grpc;
use linerate_server::grpc::{Code, Method, Request, Response, Service, Sink, Status};
use linerate_server::testing::TestClient;
use linerate_server::{
    ErrorRenderer, Method as HttpMethod, Metrics, Next, OnWorker, OwnedRequest,
    Response as HttpResponse, Router, Stats,
};

/// The count of `linerate_handler_panics_total{kind=…}` in `/metrics`'s text now (the
/// counter is per process: tests read how much it grew).
fn panics(kind: &str) -> u64 {
    let text = linerate_server::admin::render(&Metrics::default(), &Stats::default());
    let series = format!("linerate_handler_panics_total{{kind=\"{kind}\"}} ");
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(series.as_str()))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"));
    line.parse().unwrap()
}

/// A service whose every method panics: unary at once and after a wait, server streaming
/// after a message.
struct Panics;

impl Service for Panics {
    fn name(&self) -> &'static str {
        "test.Panics"
    }

    fn methods(self) -> Vec<Method> {
        vec![
            Method::unary(
                "/test.Panics/AtOnce",
                |_: Request<HealthCheckRequest>| -> std::future::Ready<
                    Result<Response<HealthCheckResponse>, Status>,
                > { panic!("at once") },
            ),
            Method::unary(
                "/test.Panics/Later",
                |_: Request<HealthCheckRequest>| async move {
                    tokio::task::yield_now().await;
                    if true {
                        panic!("later");
                    }
                    Ok(Response::new(HealthCheckResponse::default()))
                },
            ),
            Method::server_streaming(
                "/test.Panics/Stream",
                |_: Request<HealthCheckRequest>, mut sink: Sink<HealthCheckResponse>| async move {
                    let sent = sink.send(&HealthCheckResponse::default()).await;
                    tokio::task::yield_now().await;
                    if true {
                        panic!("streaming");
                    }
                    (sent, sink)
                },
            ),
        ]
    }
}

/// Each method's status as the client reads it (a streaming call's at its end).
fn statuses(client: &TestClient) -> Vec<(Code, String)> {
    client.block_on(async {
        let grpc = Grpc::new(client.grpc_channel());
        let mut out = Vec::new();
        for path in ["/test.Panics/AtOnce", "/test.Panics/Later"] {
            let r = grpc
                .unary::<_, HealthCheckResponse>(path, Request::new(HealthCheckRequest::default()))
                .await;
            let e = r.expect_err(path);
            out.push((e.code(), e.message().to_string()));
        }
        let mut stream = grpc
            .server_streaming::<_, HealthCheckResponse>(
                "/test.Panics/Stream",
                Request::new(HealthCheckRequest::default()),
            )
            .await
            .expect("the stream's head")
            .into_inner();
        let end = loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                Ok(None) => panic!("the stream ended OK"),
                Err(e) => break e,
            }
        };
        out.push((end.code(), end.message().to_string()));
        out
    })
}

async fn through(req: OwnedRequest, next: Next) -> HttpResponse {
    tokio::task::yield_now().await;
    next.run(req).await
}

#[test]
fn a_panicking_grpc_handler_ends_its_call_internal_and_is_counted() {
    let before = panics("grpc");
    let plain = TestClient::new(Router::new().grpc(Panics));
    // Under an async layer, a unary call runs through the layered path.
    let layered = TestClient::new(Router::new().grpc(Panics).around(through));
    for client in [&plain, &layered] {
        let got = statuses(client);
        let want = (Code::Internal, "the handler panicked".to_string());
        assert_eq!(got, vec![want.clone(), want.clone(), want]);
    }
    assert!(
        panics("grpc") >= before + 6,
        "{} then {before}",
        panics("grpc")
    );
}

#[test]
fn the_routers_grpc_panic_status_chooses_the_code() {
    // Set before the service is added, and after (over a group's), for every method.
    let before = TestClient::new(Router::new().grpc_panic_status(Code::Unknown).grpc(Panics));
    let after = TestClient::new(
        Router::new()
            .group(|g| g.grpc(Panics))
            .grpc_panic_status(Code::Unavailable),
    );
    for (client, code) in [(&before, Code::Unknown), (&after, Code::Unavailable)] {
        let got = statuses(client);
        assert!(got.iter().all(|(c, _)| *c == code), "{got:?}");
    }
}

#[test]
fn a_panicking_rest_handler_is_a_500_the_error_renderer_renders_and_is_counted() {
    let before = panics("http");
    let router = Router::new()
        .get("/sync", |_| -> HttpResponse { panic!("sync") })
        .get_async("/async", OnWorker, |_| async move {
            tokio::task::yield_now().await;
            if true {
                panic!("async");
            }
            HttpResponse::text("")
        })
        .get_async(
            "/async-at-once",
            OnWorker,
            |_| -> std::future::Ready<HttpResponse> { panic!("async, at once") },
        )
        // Its Responder dropped by the panic: the server's 500 "did not answer".
        .deferred(HttpMethod::Get, "/deferred", |_, _| panic!("deferred"))
        .layer(ErrorRenderer(|status: u16, message: &str| {
            HttpResponse::text_owned(format!("{{\"status\":{status},\"error\":\"{message}\"}}"))
                .status(status)
                .content_type("application/json")
        }));
    let client = TestClient::new(router);
    for path in ["/sync", "/async", "/async-at-once", "/deferred"] {
        for http2 in [false, true] {
            let mut req = client.get(path);
            if http2 {
                req = req.http2();
            }
            let r = req.send();
            assert_eq!(r.status(), 500, "{path}");
            assert_eq!(
                r.header("content-type"),
                Some("application/json"),
                "{path} http2={http2}: {}",
                r.text()
            );
            let error = match path {
                "/deferred" => "500 Internal Server Error: the handler did not answer",
                _ => "Internal Server Error",
            };
            assert_eq!(
                r.text(),
                format!("{{\"status\":500,\"error\":\"{error}\"}}"),
                "{path}"
            );
        }
    }
    assert!(
        panics("http") >= before + 8,
        "{} then {before}",
        panics("http")
    );
}
