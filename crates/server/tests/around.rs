//! Middleware that can wait, through the in-process test client over
//! HTTP/1.1 and HTTP/2 framing: async layers awaiting a timer and a shared lookup before the
//! handler, answering without it, changing its answer after it; layers and settings per
//! group and per route (a group of one); route timeouts dropping the handler's future and
//! answering through the layers outside them; route body limits above and below the site's;
//! the application's state in sync and async handlers and layers; precedence and duplicates
//! with groups.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use linerate_server::testing::{Protocol, TestClient, TestResponse};
use linerate_server::{
    Config, ErrorRenderer, Extensions, Layer, Next, OnWorker, OwnedRequest, Request, Response,
    Router,
};

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

/// Tokens to users: what an async layer looks up, as it would in a database.
struct Users(HashMap<&'static str, &'static str>);

impl Users {
    /// Looks `token` up after a turn of the runtime's timer, as a query would wait.
    async fn find(&self, token: &str) -> Option<&'static str> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        tokio::task::yield_now().await;
        self.0.get(token).copied()
    }
}

/// The authenticated user, attached by [`auth`] for the handler.
struct User(&'static str);

/// An async layer: a timer, then the lookup (the router's state), then the handler; a 401
/// without the handler for an unknown token; after the handler, a field saying who it was.
async fn auth(mut req: OwnedRequest, next: Next) -> Response {
    tokio::time::sleep(Duration::from_millis(1)).await;
    let token = req
        .header("authorization")
        .and_then(|v| v.strip_prefix(b"Bearer "))
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .unwrap_or_default();
    let Some(name) = req.state::<Users>().find(&token).await else {
        return Response::text("who are you?\n").status(401);
    };
    req.extensions_mut().insert(User(name));
    let mut resp = next.run(req).await;
    resp.set_header("X-User", name).unwrap();
    resp
}

/// Adds `X-Outer: <its status>` to every answer that passes: what an outer layer sees.
async fn outer(req: OwnedRequest, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let status = resp.status_code().to_string();
    resp.set_header("X-Outer", status).unwrap();
    resp
}

fn users() -> Users {
    Users(HashMap::from([("good", "alice")]))
}

fn send(c: &TestClient, path: &str, token: &str) -> TestResponse {
    c.get(path)
        .header("authorization", format!("Bearer {token}"))
        .send()
}

#[test]
fn an_async_layer_awaits_then_calls_the_handler_or_answers_itself_and_sees_its_answer() {
    for protocol in PROTOCOLS {
        let calls = Arc::new(AtomicUsize::new(0));
        let (c1, c2) = (calls.clone(), calls.clone());
        let router = Router::new()
            .with_state(users())
            .get("/me", move |req| {
                c1.fetch_add(1, Ordering::SeqCst);
                let user = req.extension::<User>().map_or("nobody", |u| u.0);
                Response::text_owned(format!("sync {user}"))
            })
            .get_async("/me-async", OnWorker, move |req: OwnedRequest| {
                c2.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let user = req.extension::<User>().map_or("nobody", |u| u.0);
                    (201, format!("async {user}"))
                }
            })
            .around(auth);
        let c = TestClient::new(router).protocol(protocol);
        for (path, status, body) in [
            ("/me", 200, "sync alice"),
            ("/me-async", 201, "async alice"),
        ] {
            let r = send(&c, path, "good");
            assert_eq!(
                (r.status(), r.text().as_str()),
                (status, body),
                "{protocol:?} {path}"
            );
            // Code after `next` saw the handler's answer and added to it.
            assert_eq!(r.header("x-user"), Some("alice"), "{protocol:?} {path}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        for path in ["/me", "/me-async"] {
            let r = send(&c, path, "bad");
            assert_eq!((r.status(), r.text().as_str()), (401, "who are you?\n"));
            assert_eq!(r.header("x-user"), None);
        }
        assert_eq!(
            calls.load(Ordering::SeqCst),
            2,
            "{protocol:?}: no handler after a 401"
        );
    }
}

/// Counts the requests it sees and marks their answers: a group's sync layer.
struct Seen(Arc<AtomicUsize>);

impl Layer for Seen {
    fn before(&self, _: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        self.0.fetch_add(1, Ordering::SeqCst);
        None
    }
    fn after(&self, _: &Extensions, resp: &mut Response) {
        resp.set_header("X-Group-Sync", "1").unwrap();
    }
}

/// Marks answers: a group's async layer.
async fn group_mark(req: OwnedRequest, next: Next) -> Response {
    let mut resp = next.run(req).await;
    resp.set_header("X-Group", "admin").unwrap();
    resp
}

#[test]
fn a_groups_layers_apply_to_its_routes_only_inside_the_routers() {
    for protocol in PROTOCOLS {
        let seen = Arc::new(AtomicUsize::new(0));
        let s = seen.clone();
        let router = Router::new()
            .get("/open", |_| "open")
            .group(|g| {
                g.get("/admin", |_| "admin")
                    .around(group_mark)
                    .layer(Seen(s))
            })
            // A group of one route: its own layer.
            .group(|g| g.get("/one", |_| "one").around(outer))
            .around(auth)
            .with_state(users());
        let c = TestClient::new(router).protocol(protocol);
        let open = send(&c, "/open", "good");
        assert_eq!((open.status(), open.text().as_str()), (200, "open"));
        assert_eq!(open.header("x-user"), Some("alice"), "the router's layer");
        assert_eq!(
            open.header("x-group"),
            None,
            "{protocol:?}: not in the group"
        );
        assert_eq!(open.header("x-group-sync"), None);
        assert_eq!(open.header("x-outer"), None, "another route's layer");
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "the group's layer never ran"
        );

        let admin = send(&c, "/admin", "good");
        assert_eq!((admin.status(), admin.text().as_str()), (200, "admin"));
        assert_eq!(admin.header("x-group"), Some("admin"));
        assert_eq!(admin.header("x-group-sync"), Some("1"));
        assert_eq!(admin.header("x-user"), Some("alice"));
        assert_eq!(admin.header("x-outer"), None);
        assert_eq!(seen.load(Ordering::SeqCst), 1);

        let one = send(&c, "/one", "good");
        assert_eq!(one.header("x-outer"), Some("200"));
        assert_eq!(one.header("x-group"), None);

        // The router's async layer is outside the group's: its 401 never reaches the
        // group's async layer (the group's sync layer, outside all async ones, sees it).
        let refused = send(&c, "/admin", "bad");
        assert_eq!(refused.status(), 401);
        assert_eq!(refused.header("x-group"), None);
        assert_eq!(refused.header("x-group-sync"), Some("1"));
    }
}

/// Sets its flag when dropped: whether a handler's future was dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_route_timeout_drops_the_handlers_future_and_answers_503_through_the_outer_layers() {
    for protocol in PROTOCOLS {
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let inner_ran = Arc::new(AtomicBool::new(false));
        let inner = inner_ran.clone();
        let router = Router::new()
            .get("/fast", |_| "fast")
            .group(|g| {
                g.get_async("/never", OnWorker, move |_| {
                    let guard = DropFlag(flag.clone());
                    async move {
                        let _guard = guard;
                        std::future::pending::<Response>().await
                    }
                })
                // Inside the timeout: dropped with the handler, its `after` never runs.
                .around(move |req: OwnedRequest, next: Next| {
                    let inner = inner.clone();
                    async move {
                        let mut resp = next.run(req).await;
                        inner.store(true, Ordering::SeqCst);
                        resp.set_header("X-Inner", "1").unwrap();
                        resp
                    }
                })
                .timeout(Duration::from_millis(20))
            })
            // A sync handler cannot be interrupted: its answer goes out.
            .group(|g| {
                g.get("/sync-slow", |_| {
                    std::thread::sleep(Duration::from_millis(30));
                    "late but whole"
                })
                .timeout(Duration::from_millis(1))
            })
            .around(outer)
            .layer(ErrorRenderer(|status: u16, message: &str| {
                Response::text_owned(format!("{{\"status\":{status},\"error\":\"{message}\"}}"))
                    .status(status)
                    .content_type("application/json")
            }));
        let c = TestClient::new(router).protocol(protocol);
        let r = c.get("/never").send();
        assert_eq!(r.status(), 503, "{protocol:?}");
        assert_eq!(
            r.header("x-outer"),
            Some("503"),
            "{protocol:?}: through the outer layer"
        );
        assert_eq!(r.header("x-inner"), None);
        assert_eq!(r.header("content-type"), Some("application/json"));
        assert!(r.text().starts_with("{\"status\":503,"), "{}", r.text());
        // The connection's answer was no close: the next request on the client is served.
        let fast = c.get("/fast").send();
        assert_eq!((fast.status(), fast.header("x-outer")), (200, Some("200")));
        // By then the runtime has run the handler's task, woken when its answer was no
        // longer wanted (the client drives the runtime only while it serves).
        assert!(
            dropped.load(Ordering::SeqCst),
            "{protocol:?}: the future was dropped"
        );
        assert!(!inner_ran.load(Ordering::SeqCst));
        let slow = c.get("/sync-slow").send();
        assert_eq!(
            (slow.status(), slow.text().as_str()),
            (200, "late but whole"),
            "{protocol:?}"
        );
    }
}

/// Adds `X-Seen` to every answer: a router's sync layer, which sees the 413s too.
struct Outer;

impl Layer for Outer {
    fn after(&self, _: &Extensions, resp: &mut Response) {
        resp.set_header("X-Seen", resp.status_code().to_string())
            .unwrap();
    }
}

/// Counts a streamed body's bytes and answers with the count.
#[derive(Default)]
struct Count(usize);

impl linerate_server::BodySink for Count {
    fn data(&mut self, chunk: &[u8]) {
        self.0 += chunk.len();
    }
    fn finish(self: Box<Self>, _: &Request<'_>) -> Response {
        Response::text_owned(self.0.to_string())
    }
}

fn limits_client(protocol: Protocol) -> TestClient {
    let echo = |req: &Request<'_>| Response::text_owned(req.body().len().to_string());
    let router = Router::new()
        .post("/default", echo)
        .group(|g| g.post("/big", echo).body_limit(64))
        .group(|g| g.post("/small", echo).body_limit(4))
        // Below `max_stream_body_bytes` (1 GiB by default).
        .group(|g| {
            g.streaming(linerate_server::Method::Post, "/stream", |_| {
                Box::new(Count::default())
            })
            .body_limit(8)
        })
        .group(|g| {
            g.post_async("/big-async", OnWorker, |req: OwnedRequest| async move {
                req.body().len().to_string()
            })
            .around(outer)
            .body_limit(64)
        })
        .layer(Outer);
    let config = Config {
        max_body_bytes: 16,
        ..Config::default()
    };
    TestClient::with_config(config, router)
        .expect("client")
        .protocol(protocol)
}

#[test]
fn a_route_body_limit_above_or_below_the_sites_is_checked_by_length() {
    for protocol in PROTOCOLS {
        let c = limits_client(protocol);
        let cases: &[(&str, usize, u16)] = &[
            ("/default", 16, 200),
            ("/default", 17, 413),
            ("/big", 64, 200),
            ("/big", 65, 413),
            ("/big-async", 64, 200),
            ("/big-async", 65, 413),
            ("/small", 4, 200),
            ("/small", 5, 413),
            ("/stream", 8, 200),
            ("/stream", 9, 413),
        ];
        for &(path, len, status) in cases {
            let r = c.post(path).body(vec![b'x'; len]).send();
            assert_eq!(r.status(), status, "{protocol:?} {path} {len}");
            let status_text = status.to_string();
            assert_eq!(
                r.header("x-seen"),
                Some(status_text.as_str()),
                "{path} {len}"
            );
            match status {
                200 => assert_eq!(r.text(), len.to_string()),
                _ => assert_eq!(r.text(), "Content Too Large\n"),
            }
        }
    }
}

/// A chunked body of `len` bytes in chunks of 8.
fn chunked(len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        let n = left.min(8);
        out.extend_from_slice(format!("{n:x}\r\n").as_bytes());
        out.extend(std::iter::repeat_n(b'x', n));
        out.extend_from_slice(b"\r\n");
        left -= n;
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

#[test]
fn a_route_body_limit_above_or_below_the_sites_is_checked_while_a_chunked_body_is_read() {
    let c = limits_client(Protocol::Http1);
    let cases: &[(&str, usize, u16)] = &[
        ("/default", 16, 200),
        ("/default", 24, 413),
        ("/big", 64, 200),
        ("/big", 72, 413),
        ("/big-async", 64, 200),
        ("/big-async", 72, 413),
        ("/small", 4, 200),
        ("/small", 8, 413),
        ("/stream", 8, 200),
        ("/stream", 16, 413),
    ];
    for &(path, len, status) in cases {
        let r = c
            .post(path)
            .header("transfer-encoding", "chunked")
            .body(chunked(len))
            .send();
        assert_eq!(r.status(), status, "{path} {len}");
        let status_text = status.to_string();
        assert_eq!(
            r.header("x-seen"),
            Some(status_text.as_str()),
            "{path} {len}"
        );
        match status {
            200 => assert_eq!(r.text(), len.to_string()),
            _ => assert_eq!(r.text(), "Content Too Large\n"),
        }
    }
}

/// The application's state: one counter every handler and layer shares.
#[derive(Default)]
struct Hits(AtomicUsize);

/// A sync layer reading the state.
struct CountLayer;

impl Layer for CountLayer {
    fn before(&self, req: &Request<'_>, _: &mut Extensions) -> Option<Response> {
        req.state::<Hits>().0.fetch_add(1, Ordering::SeqCst);
        None
    }
}

#[test]
fn state_reaches_sync_and_async_handlers_and_layers() {
    for protocol in PROTOCOLS {
        let hit = |req: &Request<'_>| {
            let n = req.state::<Hits>().0.fetch_add(1, Ordering::SeqCst) + 1;
            n.to_string()
        };
        let router = Router::new()
            .get("/sync", hit)
            .get_async("/async", OnWorker, |req: OwnedRequest| async move {
                tokio::task::yield_now().await;
                let n = req.state::<Hits>().0.fetch_add(1, Ordering::SeqCst) + 1;
                n.to_string()
            })
            .group(|g| {
                g.get("/layered", hit)
                    .around(|req: OwnedRequest, next: Next| async move {
                        req.state::<Hits>().0.fetch_add(10, Ordering::SeqCst);
                        next.run(req).await
                    })
                    .layer(CountLayer)
            })
            .get("/missing", |req| req.state::<String>().clone())
            .with_state(Hits::default());
        let c = TestClient::new(router).protocol(protocol);
        assert_eq!(c.get("/sync").send().text(), "1");
        assert_eq!(c.get("/async").send().text(), "2");
        // The sync layer (+1), the async layer (+10), then the handler (+1).
        assert_eq!(c.get("/layered").send().text(), "14");
        // No state of that type: a programming error, answered 500.
        assert_eq!(c.get("/missing").send().status(), 500, "{protocol:?}");
    }
}

#[test]
fn panics_in_an_async_layer_or_under_one_are_500() {
    for protocol in PROTOCOLS {
        let router = Router::new()
            .group(|g| {
                g.get("/layer-panics", |_| "never").around(
                    |_req: OwnedRequest, _next: Next| async move {
                        tokio::task::yield_now().await;
                        panic!("layer");
                        #[allow(unreachable_code)]
                        Response::text("")
                    },
                )
            })
            .group(|g| {
                // Panics making its future, before any poll of it.
                g.get("/layer-panics-at-once", |_| "never").around(
                    |_req: OwnedRequest, _next: Next| -> std::future::Ready<Response> {
                        panic!("layer, at once")
                    },
                )
            })
            .get("/handler-panics", |_| -> Response { panic!("handler") })
            .get_async("/async-panics", OnWorker, |_| async move {
                tokio::task::yield_now().await;
                panic!("async handler");
                #[allow(unreachable_code)]
                Response::text("")
            })
            .get_async(
                "/async-panics-at-once",
                OnWorker,
                |_| -> std::future::Ready<Response> { panic!("async handler, at once") },
            )
            .around(outer);
        let c = TestClient::new(router).protocol(protocol);
        for path in ["/layer-panics", "/layer-panics-at-once"] {
            let r = c.get(path).send();
            assert_eq!(r.status(), 500, "{protocol:?} {path}");
            assert_eq!(
                r.header("x-outer"),
                Some("500"),
                "the outer layer saw it: {path}"
            );
        }
        // A handler's panic is a 500 the layers see.
        for path in ["/handler-panics", "/async-panics", "/async-panics-at-once"] {
            let r = c.get(path).send();
            assert_eq!(r.status(), 500, "{protocol:?} {path}");
            assert_eq!(r.header("x-outer"), Some("500"), "{protocol:?} {path}");
        }
    }
}

#[test]
fn the_most_specific_route_wins_across_groups_and_duplicates_across_them_are_refused() {
    for protocol in PROTOCOLS {
        let router = Router::new()
            .get("/t/{id}", |req| {
                format!("id {}", req.param("id").unwrap_or(""))
            })
            .group(|g| g.get("/t/events", |_| "events").around(group_mark))
            .get("/t/{id}/x", |_| "x")
            // A nested group: its patterns below the prefix, its layer on them only.
            .get("/api/t/events", |_| "root events")
            .nest(
                "/api",
                Router::new()
                    .get("/", |_| "api")
                    .get("/t/{id}", |req| {
                        format!("api {}", req.param("id").unwrap_or(""))
                    })
                    .around(group_mark),
            );
        let c = TestClient::new(router).protocol(protocol);
        let api = c.get("/api").send();
        assert_eq!(
            (api.text().as_str(), api.header("x-group")),
            ("api", Some("admin"))
        );
        let nested = c.get("/api/t/3").send();
        assert_eq!(
            (nested.text().as_str(), nested.header("x-group")),
            ("api 3", Some("admin"))
        );
        // The root's literal beats the nested parameter.
        let literal = c.get("/api/t/events").send();
        assert_eq!(
            (literal.text().as_str(), literal.header("x-group")),
            ("root events", None)
        );
        let events = c.get("/t/events").send();
        assert_eq!(
            (events.text().as_str(), events.header("x-group")),
            ("events", Some("admin"))
        );
        let id = c.get("/t/7").send();
        assert_eq!((id.text().as_str(), id.header("x-group")), ("id 7", None));
    }
    // The same method and pattern in a group and in the router: refused.
    let dup = Router::new().get("/u/{id}", |_| "root").group(|g| {
        g.get("/u/{name}", |_| "group")
            .timeout(Duration::from_secs(1))
    });
    let err = TestClient::with_config(Config::default(), dup).expect_err("duplicate");
    assert!(
        err.to_string()
            .contains("route GET /u/{id} is registered twice"),
        "{err}"
    );
    let nested = Router::new()
        .post("/api/x", |_| "root")
        .nest("/api", Router::new().post("/x", |_| "nested"));
    let err = TestClient::with_config(Config::default(), nested).expect_err("duplicate");
    assert!(
        err.to_string()
            .contains("route POST /api/x is registered twice"),
        "{err}"
    );
}

/// Streaming and deferred routes under an async layer were refused at start
/// ("is a streaming route under an async layer"); they are served now, the layer around
/// them. Only a WebSocket route is still refused (tests/around_kinds.rs).
#[test]
fn streaming_and_deferred_routes_under_an_async_layer_are_served_through_it() {
    struct Sink(usize);
    impl linerate_server::BodySink for Sink {
        fn data(&mut self, chunk: &[u8]) {
            self.0 += chunk.len();
        }
        fn finish(self: Box<Self>, _: &Request<'_>) -> Response {
            Response::text_owned(format!("got {}", self.0))
        }
    }
    let streaming = Router::new()
        .streaming(linerate_server::Method::Post, "/up", |_| Box::new(Sink(0)))
        .around(outer);
    let c = TestClient::with_config(Config::default(), streaming).expect("served");
    let r = c.post("/up").body("12345").send();
    assert_eq!((r.status(), r.text().as_str()), (200, "got 5"));
    assert_eq!(r.header("x-outer"), Some("200"));
    let deferred = Router::new()
        .group(|g| {
            g.deferred(linerate_server::Method::Get, "/d", |_, res| res.send("x"))
                .timeout(Duration::from_secs(1))
                .around(outer)
        })
        .get("/fine", |_| "fine");
    let c = TestClient::with_config(Config::default(), deferred).expect("served");
    let r = c.get("/d").send();
    assert_eq!((r.status(), r.text().as_str()), (200, "x"));
    assert_eq!(r.header("x-outer"), Some("200"));
    assert_eq!(c.get("/fine").send().text(), "fine");
}

/// The whole answer to `request` from the server at `addr` (the connection closes after it).
fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the whole answer within the read timeout");
    String::from_utf8(got).unwrap()
}

#[test]
fn on_a_real_server_async_layers_wait_time_out_and_limit_bodies_on_the_worker() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let router = Router::new()
        .group(|g| {
            g.get("/me", |req| {
                req.extension::<User>().map_or("nobody", |u| u.0)
            })
            .around(auth)
        })
        .group(|g| {
            g.get_async("/never", OnWorker, move |_| {
                let guard = DropFlag(flag.clone());
                async move {
                    let _guard = guard;
                    std::future::pending::<Response>().await
                }
            })
            .timeout(Duration::from_millis(20))
        })
        .group(|g| {
            g.post("/small", |req| req.body().len().to_string())
                .body_limit(4)
        })
        .around(outer)
        .with_state(users());
    let server = linerate_server::testing::TestServer::start(router).expect("start");
    let addr = server.addr();
    let me = exchange(
        addr,
        "GET /me HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer good\r\nConnection: close\r\n\r\n",
    );
    assert!(me.starts_with("HTTP/1.1 200 OK\r\n"), "{me}");
    assert!(me.contains("\r\nX-User: alice\r\n"), "{me}");
    assert!(me.contains("\r\nX-Outer: 200\r\n"), "{me}");
    assert!(me.ends_with("\r\n\r\nalice"), "{me}");
    let never = exchange(
        addr,
        "GET /never HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    assert!(never.starts_with("HTTP/1.1 503 "), "{never}");
    assert!(never.contains("\r\nX-Outer: 503\r\n"), "{never}");
    // The worker runs the handler's task, woken when its answer was no longer wanted, on
    // its own; bounded, not timed.
    let mut polls = 0;
    while !dropped.load(Ordering::SeqCst) && polls < 1000 {
        std::thread::sleep(Duration::from_millis(10));
        polls += 1;
    }
    assert!(
        dropped.load(Ordering::SeqCst),
        "the handler's future was dropped"
    );
    let small = exchange(
        addr,
        "POST /small HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nConnection: close\r\n\r\nxxxxx",
    );
    assert!(small.starts_with("HTTP/1.1 413 "), "{small}");
    assert!(small.ends_with("\r\n\r\nContent Too Large\n"), "{small}");
    server.stop().unwrap();
}
