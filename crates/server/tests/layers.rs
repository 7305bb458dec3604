//! Layers through the in-process test client, over HTTP/1.1 and HTTP/2 framing: the order
//! of hooks, extensions reaching every kind of handler (sync, with a body, deferred,
//! `async`), a layer answering at once, a group's layers wrapping only its routes, the
//! server's own answers (404, 405, OPTIONS, 413) passing through a router's layers, and the
//! built-in CORS, request-id and trace layers.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use linerate_server::layers::{Cors, RequestId, RequestIdValue, Trace, TraceSpan};
use linerate_server::testing::{Protocol, TestClient, TestResponse};
use linerate_server::{Config, Extensions, Layer, Method, Request, Response, Router};

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

/// A case: its name, the answer, and the status, body, `X-After` and `X-Auth-After` wanted.
type Row = (
    &'static str,
    TestResponse,
    u16,
    &'static str,
    &'static str,
    Option<&'static str>,
);

/// The names of the layers whose `before` ran, in order.
#[derive(Clone, Default)]
struct Trail(Vec<&'static str>);

/// Adds its name to the trail before, and to `X-After` after.
struct Mark(&'static str);

impl Layer for Mark {
    fn before(&self, _: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        let mut trail = ext.get::<Trail>().cloned().unwrap_or_default();
        trail.0.push(self.0);
        ext.insert(trail);
        None
    }

    fn after(&self, _: &Extensions, resp: &mut Response) {
        let after = match resp.field("x-after") {
            Some(v) => format!("{v},{}", self.0),
            None => self.0.to_string(),
        };
        resp.set_header("X-After", after).unwrap();
    }
}

/// The authenticated user.
struct User(&'static str);

/// `Authorization: Bearer good` is alice; anything else is a 401 before the handler.
struct Auth;

impl Layer for Auth {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        match req.header("authorization") {
            Some(b"Bearer good") => {
                ext.insert(User("alice"));
                None
            }
            _ => Some(
                Response::text("no")
                    .status(401)
                    .header("WWW-Authenticate", "Bearer"),
            ),
        }
    }

    fn after(&self, _: &Extensions, resp: &mut Response) {
        resp.set_header("X-Auth-After", "1").unwrap();
    }
}

fn trail(req: &Request<'_>) -> String {
    req.extension::<Trail>()
        .map(|t| t.0.join(","))
        .unwrap_or_default()
}

fn user(user: Option<&User>) -> &'static str {
    user.map_or("nobody", |u| u.0)
}

/// A tokio runtime on its own thread, for the async routes.
fn spawner() -> impl Fn(linerate_server::BoxFuture) + Clone + Send + Sync + 'static {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .build()
        .expect("runtime");
    let handle = rt.handle().clone();
    std::mem::forget(rt);
    move |f| {
        handle.spawn(f);
    }
}

/// `/open` and `/echo` for everyone; `/users/…` behind `Auth`, as a group; `Mark`s around
/// everything. `calls` counts handler calls below `/users`.
fn router(calls: Arc<AtomicUsize>) -> Router {
    let spawn = spawner();
    let (c1, c2, c3) = (calls.clone(), calls.clone(), calls);
    let users = Router::new()
        .get("/users/{id}", move |req| {
            c1.fetch_add(1, Ordering::SeqCst);
            let who = user(req.extension::<User>());
            Response::text_owned(format!(
                "{who} {} {}",
                req.param("id").unwrap_or("?"),
                trail(req)
            ))
        })
        .deferred(Method::Post, "/users/{id}", move |req, res| {
            c2.fetch_add(1, Ordering::SeqCst);
            let who = user(req.extension::<User>());
            let body = String::from_utf8_lossy(req.body()).into_owned();
            std::thread::spawn(move || {
                res.send(Response::text_owned(format!("{who} deferred {body}")))
            });
        })
        .get_async("/users/{id}/async", spawn, move |req| {
            c3.fetch_add(1, Ordering::SeqCst);
            let who = user(req.extension::<User>());
            async move { Response::text_owned(format!("{who} async")) }
        })
        .layer(Auth);
    Router::new()
        .get("/open", |req| {
            Response::text_owned(format!("{} {}", user(req.extension::<User>()), trail(req)))
        })
        .post("/echo", |req| {
            Response::text_owned(format!(
                "{} {}",
                trail(req),
                String::from_utf8_lossy(req.body())
            ))
        })
        .merge(users)
        .layer(Mark("a"))
        // Added last: the outermost (its `before` first, its `after` last).
        .layer(Mark("b"))
}

fn client(protocol: Protocol, calls: &Arc<AtomicUsize>) -> TestClient {
    let config = Config {
        max_body_bytes: 16,
        ..Config::default()
    };
    TestClient::with_config(config, router(calls.clone()))
        .expect("client")
        .protocol(protocol)
}

#[test]
fn hooks_run_in_order_and_extensions_reach_every_kind_of_handler() {
    for protocol in PROTOCOLS {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = client(protocol, &calls);
        let good = |r: linerate_server::testing::TestRequest<'_>| {
            r.header("authorization", "Bearer good").send()
        };
        // (response, status, body, X-After, X-Auth-After)
        let rows: Vec<Row> = vec![
            (
                "open",
                c.get("/open").send(),
                200,
                "nobody b,a",
                "a,b",
                None,
            ),
            (
                "body read after the hooks",
                c.post("/echo").body("hi").send(),
                200,
                "b,a hi",
                "a,b",
                None,
            ),
            (
                "group, sync",
                good(c.get("/users/7")),
                200,
                "alice 7 b,a",
                "a,b",
                Some("1"),
            ),
            (
                "group, deferred with a body",
                good(c.post("/users/7").body("x=1")),
                200,
                "alice deferred x=1",
                "a,b",
                Some("1"),
            ),
            (
                "group, async",
                good(c.get("/users/7/async")),
                200,
                "alice async",
                "a,b",
                Some("1"),
            ),
            // Auth answers at once: the handler is not called, its own after is not run, the
            // router's layers see the 401.
            ("refused", c.get("/users/7").send(), 401, "no", "a,b", None),
            (
                "refused with a body",
                c.post("/users/7").body("x").send(),
                401,
                "no",
                "a,b",
                None,
            ),
        ];
        for (name, r, status, body, after, auth_after) in rows {
            assert_eq!(r.status(), status, "{protocol:?} {name}");
            assert_eq!(r.text(), body, "{protocol:?} {name}");
            assert_eq!(r.header("x-after"), Some(after), "{protocol:?} {name}");
            assert_eq!(r.header("x-auth-after"), auth_after, "{protocol:?} {name}");
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3,
            "{protocol:?}: refused requests never reach the handler"
        );
    }
}

#[test]
fn the_servers_own_answers_pass_through_the_routers_layers() {
    for protocol in PROTOCOLS {
        let calls = Arc::new(AtomicUsize::new(0));
        let c = client(protocol, &calls);
        let rows: Vec<(&str, TestResponse, u16)> = vec![
            ("404", c.get("/nothing").send(), 404),
            ("405", c.delete("/open").send(), 405),
            ("OPTIONS", c.options("/open").send(), 204),
            // Declared over max_body_bytes: refused before the body is read.
            ("413", c.post("/echo").body(vec![b'x'; 64]).send(), 413),
            // Not declared (chunked over HTTP/1.1, DATA without a length over HTTP/2): the
            // connection refuses it once more than the limit has come.
            (
                "413 while reading",
                c.post("/echo")
                    .header("transfer-encoding", "chunked")
                    .body(format!("40\r\n{}\r\n0\r\n\r\n", "x".repeat(64)))
                    .send(),
                413,
            ),
            // A group's layers do not see what is not theirs.
            ("405 below the group", c.put("/users/7").send(), 405),
        ];
        for (name, r, status) in rows {
            assert_eq!(r.status(), status, "{protocol:?} {name}");
            assert_eq!(r.header("x-after"), Some("a,b"), "{protocol:?} {name}");
            assert_eq!(r.header("x-auth-after"), None, "{protocol:?} {name}");
        }
    }
}

fn cors_router() -> Router {
    Router::new().get("/api", |_| Response::text("data")).layer(
        Cors::origins(["https://app.example"])
            .allow_methods(&[Method::Get, Method::Put])
            .expose_headers(["X-Total"])
            .max_age(600),
    )
}

#[test]
fn cors_preflights_are_answered_and_allowed_origins_echoed() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(cors_router()).protocol(protocol);
        let pre = c
            .options("/api")
            .header("origin", "https://app.example")
            .header("access-control-request-method", "PUT")
            .header(
                "access-control-request-headers",
                "content-type, authorization",
            )
            .send();
        assert_eq!(pre.status(), 204, "{protocol:?}");
        let fields = [
            ("access-control-allow-origin", Some("https://app.example")),
            ("access-control-allow-methods", Some("GET, PUT")),
            (
                "access-control-allow-headers",
                Some("content-type, authorization"),
            ),
            ("access-control-max-age", Some("600")),
            (
                "vary",
                Some("Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
            ),
            ("allow", None),
        ];
        for (name, want) in fields {
            assert_eq!(pre.header(name), want, "{protocol:?} preflight {name}");
        }

        // Another origin's preflight is the server's plain OPTIONS answer: no CORS field.
        let other = c
            .options("/api")
            .header("origin", "https://evil.example")
            .header("access-control-request-method", "PUT")
            .send();
        assert_eq!(other.status(), 204, "{protocol:?}");
        assert_eq!(other.header("access-control-allow-origin"), None);
        assert_eq!(other.header("allow"), Some("GET, HEAD, OPTIONS"));

        // (origin, path, status, Access-Control-Allow-Origin)
        let rows: &[(Option<&str>, &str, u16, Option<&str>)] = &[
            (
                Some("https://app.example"),
                "/api",
                200,
                Some("https://app.example"),
            ),
            (
                Some("https://app.example"),
                "/missing",
                404,
                Some("https://app.example"),
            ),
            (Some("https://evil.example"), "/api", 200, None),
            (None, "/api", 200, None),
        ];
        for &(origin, path, status, allow) in rows {
            let mut r = c.get(path);
            if let Some(o) = origin {
                r = r.header("origin", o);
            }
            let r = r.send();
            assert_eq!(r.status(), status, "{protocol:?} {origin:?} {path}");
            assert_eq!(
                r.header("access-control-allow-origin"),
                allow,
                "{protocol:?} {origin:?} {path}"
            );
            assert_eq!(
                r.header("vary"),
                Some("Origin"),
                "{protocol:?} {origin:?} {path}"
            );
            let expose = allow.map(|_| "X-Total");
            assert_eq!(r.header("access-control-expose-headers"), expose);
        }
    }
}

#[test]
fn any_origin_is_a_star_unless_credentials_are_allowed() {
    let star = TestClient::new(
        Router::new()
            .get("/", |_| Response::text("x"))
            .layer(Cors::any_origin()),
    );
    let r = star.get("/").header("origin", "https://a.example").send();
    assert_eq!(r.header("access-control-allow-origin"), Some("*"));
    assert_eq!(r.header("vary"), None);
    let creds = TestClient::new(
        Router::new()
            .get("/", |_| Response::text("x"))
            .layer(Cors::any_origin().allow_credentials()),
    );
    let r = creds.get("/").header("origin", "https://a.example").send();
    assert_eq!(
        r.header("access-control-allow-origin"),
        Some("https://a.example")
    );
    assert_eq!(r.header("access-control-allow-credentials"), Some("true"));
    assert_eq!(r.header("vary"), Some("Origin"));
}

/// `/id` answers the request id and whether the trace span is there.
fn id_router() -> Router {
    Router::new()
        .get("/id", |req| {
            let id = req.extension::<RequestIdValue>().map(|v| v.0.clone());
            let traced = req.extension::<TraceSpan>().is_some();
            Response::text_owned(format!("{} {traced}", id.unwrap_or_default()))
        })
        .layer(RequestId)
        .layer(Trace)
}

#[test]
fn request_ids_are_kept_or_made_and_handlers_see_them_and_the_span() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(id_router()).protocol(protocol);
        let kept = c.get("/id").header("x-request-id", "abc-123").send();
        assert_eq!(kept.text(), "abc-123 true", "{protocol:?}");
        assert_eq!(kept.header("x-request-id"), Some("abc-123"));
        let made = c.get("/id").header("x-request-id", "has space").send();
        let id = made.header("x-request-id").expect("an id").to_string();
        assert_ne!(id, "has space");
        assert_eq!(made.text(), format!("{id} true"), "{protocol:?}");
        let other = c.get("/id").send();
        assert_ne!(other.header("x-request-id"), Some(id.as_str()));
        // The server's own 404 carries one too.
        let missing = c.get("/none").send();
        assert_eq!(missing.status(), 404);
        assert_eq!(missing.header("x-request-id").map(str::len), Some(id.len()));
    }
}

/// Records the fields of every span made while it is the thread's subscriber.
#[derive(Default)]
struct SpanFields(std::sync::Mutex<Vec<String>>);

/// Writes a span's fields as `name=value` pairs.
struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for SpanFields {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut fields = Fields(String::new());
        span.record(&mut fields);
        let mut spans = self.0.lock().unwrap();
        spans.push(fields.0);
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut fields = Fields(String::new());
        values.record(&mut fields);
        let mut spans = self.0.lock().unwrap();
        if let Some(s) = spans.get_mut(span.into_u64() as usize - 1) {
            s.push_str(&fields.0);
        }
    }
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// Regression: the trace span's `client` field was empty unless the configuration kept
/// peers (an access log, trusted proxies, an upstream, a per-client limit).
#[test]
fn the_trace_span_names_the_client_without_an_access_log() {
    let spans = Arc::new(SpanFields::default());
    let c = TestClient::new(id_router());
    let res = tracing::subscriber::with_default(spans.clone(), || c.get("/id").send());
    assert_eq!(res.status(), 200);
    let spans = spans.0.lock().unwrap();
    assert!(
        spans.iter().any(|s| s.contains("client=\"127.0.0.1\"")),
        "{spans:?}"
    );
    // The version in words, as a request line names it, not Rust's `Http11`.
    assert!(
        spans.iter().any(|s| s.contains("version=\"HTTP/1.1\"")),
        "{spans:?}"
    );
}

/// The `Trace` span carried no request id, so a trace could not be matched with
/// the `X-Request-Id` its client got. The span's `request_id` is that id, the client's kept
/// or one made, with `Trace` outside `RequestId` (docs/library.md's order) or inside it.
#[test]
fn the_trace_span_carries_the_request_id_sent_back_in_x_request_id() {
    fn outer() -> Router {
        Router::new()
            .get("/id", |_| Response::text("ok"))
            .layer(RequestId)
            .layer(Trace)
    }
    fn inner() -> Router {
        Router::new()
            .get("/id", |_| Response::text("ok"))
            .layer(Trace)
            .layer(RequestId)
    }
    type Order = (&'static str, fn() -> Router);
    let orders: [Order; 2] = [("Trace outermost", outer), ("Trace innermost", inner)];
    for (order, router) in orders {
        for protocol in PROTOCOLS {
            let c = TestClient::new(router()).protocol(protocol);
            let spans = Arc::new(SpanFields::default());
            let (kept, made) = tracing::subscriber::with_default(spans.clone(), || {
                let kept = c.get("/id").header("x-request-id", "abc-123").send();
                let made = c.get("/id").send();
                (kept, made)
            });
            assert_eq!(kept.header("x-request-id"), Some("abc-123"));
            let made_id = made.header("x-request-id").expect("an id made").to_string();
            let spans = spans.0.lock().unwrap();
            assert_eq!(spans.len(), 2, "{order} {protocol:?}: {spans:?}");
            assert!(
                spans[0].contains("request_id=\"abc-123\""),
                "{order} {protocol:?}: {spans:?}"
            );
            assert!(
                spans[1].contains(&format!("request_id=\"{made_id}\"")),
                "{order} {protocol:?}: the span's id is the one sent back: {spans:?}"
            );
        }
    }
}

/// Regression: in docs/library.md's and the users example's order (`Trace` added last), `Trace`
/// was the innermost layer: a CORS preflight was neither traced nor given a request id, and
/// the traced bytes were not those sent (a rendered 413: 18 bytes logged, 42 sent). The last
/// layer added is now the outermost, as in tower.
#[test]
fn the_last_layer_added_is_the_outermost_so_trace_sees_everything_as_sent() {
    let router = || {
        Router::new()
            .post("/api", |_| Response::text("data"))
            .layer(linerate_server::ErrorRenderer(
                |status: u16, message: &str| {
                    Response::text_owned(format!("{{\"status\":{status},\"error\":\"{message}\"}}"))
                        .status(status)
                        .content_type("application/json")
                },
            ))
            .layer(Cors::origins(["https://a.example"]))
            .layer(RequestId)
            .layer(Trace)
    };
    for protocol in PROTOCOLS {
        let config = Config {
            max_body_bytes: 16,
            ..Config::default()
        };
        let c = TestClient::with_config(config, router())
            .expect("client")
            .protocol(protocol);
        let spans = Arc::new(SpanFields::default());
        let (pre, big) = tracing::subscriber::with_default(spans.clone(), || {
            let pre = c
                .options("/api")
                .header("origin", "https://a.example")
                .header("access-control-request-method", "POST")
                .send();
            let big = c.post("/api").body(vec![b'x'; 64]).send();
            (pre, big)
        });
        assert_eq!(pre.status(), 204, "{protocol:?}");
        assert!(
            pre.header("x-request-id").is_some(),
            "{protocol:?}: preflight has an id"
        );
        assert_eq!(big.status(), 413, "{protocol:?}");
        assert!(big.header("x-request-id").is_some(), "{protocol:?}");
        assert_eq!(big.header("content-type"), Some("application/json"));
        let sent = big.text().len();
        let spans = spans.0.lock().unwrap();
        assert_eq!(spans.len(), 2, "{protocol:?}: both traced: {spans:?}");
        assert!(spans[0].contains("method=\"OPTIONS\""), "{spans:?}");
        assert!(spans[0].contains("status=204"), "{spans:?}");
        assert!(
            spans[1].contains(&format!("status=413 bytes={sent} ")),
            "{protocol:?}: traced bytes are the {sent} sent: {spans:?}"
        );
    }
}

/// Sets its flag when dropped: whether a handler's future was dropped.
struct DropFlag(Arc<std::sync::atomic::AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Regression: the 503 a deferred request gets at `deferred_timeout` skipped the layers
/// (no JSON from the error renderer, no `X-Request-Id`, no CORS fields, no trace line), and
/// the handler's future went on running. Now the 503 passes through the request's layers,
/// an `async` handler's future is dropped, and a thread's `Responder` says it is cancelled.
#[test]
fn a_deferred_timeout_503_passes_through_the_layers_and_drops_the_handler() {
    for protocol in PROTOCOLS {
        let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = dropped.clone();
        let (held_tx, held_rx) = std::sync::mpsc::channel::<linerate_server::Responder>();
        let held_tx = std::sync::Mutex::new(held_tx);
        let router = Router::new()
            .get_async("/never", spawner(), move |_| {
                let guard = DropFlag(flag.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<Response>().await
                }
            })
            .deferred(Method::Get, "/held", move |_, res| {
                held_tx.lock().unwrap().send(res).unwrap();
            })
            .layer(linerate_server::ErrorRenderer(
                |status: u16, message: &str| {
                    Response::text_owned(format!("{{\"status\":{status},\"error\":\"{message}\"}}"))
                        .status(status)
                        .content_type("application/json")
                },
            ))
            .layer(Cors::any_origin())
            .layer(RequestId)
            .layer(Trace);
        let config = Config {
            deferred_timeout: std::time::Duration::from_millis(100),
            ..Config::default()
        };
        let c = TestClient::with_config(config, router)
            .expect("client")
            .protocol(protocol);
        let spans = Arc::new(SpanFields::default());
        let (never, held) = tracing::subscriber::with_default(spans.clone(), || {
            let never = c.get("/never").header("origin", "https://a.example").send();
            let held = c.get("/held").send();
            (never, held)
        });
        for (name, r) in [("async", &never), ("thread", &held)] {
            assert_eq!(r.status(), 503, "{protocol:?} {name}");
            assert_eq!(r.header("content-type"), Some("application/json"), "{name}");
            assert!(
                r.text().starts_with("{\"status\":503,"),
                "{name}: {}",
                r.text()
            );
            assert!(r.header("x-request-id").is_some(), "{protocol:?} {name}");
        }
        assert_eq!(never.header("access-control-allow-origin"), Some("*"));
        let spans = spans.0.lock().unwrap();
        assert_eq!(
            spans.iter().filter(|s| s.contains("status=503")).count(),
            2,
            "{protocol:?}: both traced: {spans:?}"
        );
        // The runtime's thread drops the future once woken; bounded, not timed.
        let mut polls = 0;
        while !dropped.load(Ordering::SeqCst) && polls < 1000 {
            std::thread::sleep(std::time::Duration::from_millis(10));
            polls += 1;
        }
        assert!(
            dropped.load(Ordering::SeqCst),
            "{protocol:?}: the future was dropped"
        );
        let res = held_rx.try_recv().expect("the thread's Responder");
        assert!(res.is_cancelled(), "{protocol:?}");
        assert!(held_rx.try_recv().is_err());
    }
}
