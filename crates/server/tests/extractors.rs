//! Handlers with typed arguments (`handler`, `handler_async`) and per-worker values
//! (`Router::with_worker_value`), through the in-process test client over HTTP/1.1 and
//! HTTP/2 framing, and a real server: each extractor's success and each of its rejections
//! with its status, for sync and `async` handlers, under an async layer too; extractors of
//! one's own; the first failing extractor answering; an `ErrorRenderer` rendering
//! rejections as JSON; one value per worker runtime, made again for each `TestClient`.

use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::Duration;

use linerate_server::testing::{Protocol, TestClient, TestServer};
use linerate_server::{
    Bytes, ErrorRenderer, Extension, Extensions, Form, FromRequest, FromRequestParts, HeaderMap,
    IntoResponse, Json, Layer, Method, Next, OnWorker, OwnedRequest, Path, Query, Rejection,
    Request, Response, Router, State, Uri, Version, Worker, handler, handler_async,
};
use serde::{Deserialize, Serialize};

const PROTOCOLS: [Protocol; 2] = [Protocol::Http1, Protocol::Http2];

#[derive(Deserialize)]
struct NewUser {
    name: String,
    age: u8,
}

#[derive(Deserialize, Serialize)]
struct Page {
    page: u32,
    #[serde(default)]
    tag: Option<String>,
}

#[derive(Deserialize)]
struct Repo {
    org: String,
    repo: String,
}

/// Not a parameter of the route it is asked of.
#[derive(Deserialize)]
#[allow(dead_code)]
struct Stray {
    org: String,
    nope: String,
}

#[derive(Deserialize, Debug)]
#[serde(rename_all = "lowercase")]
enum Status {
    Open,
    Closed,
}

#[derive(Clone)]
struct Db {
    name: &'static str,
}

/// State no router here is given.
#[derive(Clone)]
struct Missing;

/// Who the `Tag` layer (sync) or the `tag` async layer says is calling.
#[derive(Clone)]
struct Caller(String);

/// Attaches a [`Caller`] from `X-Caller` when it is sent.
struct Tag;

impl Layer for Tag {
    fn before(&self, req: &Request<'_>, ext: &mut Extensions) -> Option<Response> {
        if let Some(v) = req.header("x-caller") {
            ext.insert(Caller(String::from_utf8_lossy(v).into_owned()));
        }
        None
    }
}

/// An async layer that attaches a [`Caller`] (as a token looked up elsewhere would) and
/// marks the answer.
async fn tag(mut req: OwnedRequest, next: Next) -> Response {
    tokio::time::sleep(Duration::from_millis(1)).await;
    let caller = req.header("x-token").map(|t| format!("token {}", t.len()));
    if let Some(caller) = caller {
        req.extensions_mut().insert(Caller(caller));
    }
    let mut resp = next.run(req).await;
    resp.set_header("x-around", "yes").unwrap();
    resp
}

/// An extractor of one's own, with a rejection of its own (401 and its challenge).
struct Bearer(String);

impl FromRequestParts for Bearer {
    type Rejection = Response;

    fn from_request_parts(req: &Request<'_>) -> Result<Self, Response> {
        match req
            .header("authorization")
            .and_then(|v| v.strip_prefix(b"Bearer "))
        {
            Some(t) => Ok(Bearer(String::from_utf8_lossy(t).into_owned())),
            None => Err(Response::text("who are you?")
                .status(401)
                .header("www-authenticate", "Bearer")),
        }
    }
}

/// A body extractor of one's own: the body upper-cased; an empty body is refused (400).
struct Shout(String);

impl FromRequest for Shout {
    type Rejection = Rejection;

    fn from_request(req: &Request<'_>) -> Result<Self, Rejection> {
        if req.body().is_empty() {
            return Err(Rejection::new(400, "nothing to shout"));
        }
        Ok(Shout(String::from_utf8_lossy(req.body()).to_uppercase()))
    }
}

fn item(Path(id): Path<u32>) -> String {
    format!("item {id}")
}

fn member(Path((team, id)): Path<(String, u32)>) -> String {
    format!("{team} #{id}")
}

fn repo(Path(r): Path<Repo>) -> String {
    format!("{}/{}", r.org, r.repo)
}

fn order(Path(s): Path<Status>) -> String {
    format!("{s:?}")
}

fn list(Query(p): Query<Page>) -> Json<Page> {
    Json(p)
}

fn create(Json(u): Json<NewUser>) -> (u16, String) {
    (201, format!("{} {}", u.name, u.age))
}

fn form(Form(u): Form<NewUser>) -> String {
    format!("{} {}", u.name, u.age)
}

fn db(State(db): State<Db>) -> &'static str {
    db.name
}

fn caller(Extension(c): Extension<Caller>) -> String {
    c.0
}

fn headers(h: HeaderMap) -> String {
    let user = h.get("x-user").and_then(|v| v.to_str().ok()).unwrap_or("-");
    format!("{user} {}", h.get_all("x-multi").iter().count())
}

fn meta(m: Method, hm: http::Method, uri: Uri, v: Version) -> String {
    let same = m.as_str() == hm.as_str();
    let proto = match v {
        Version::Http10 => "1.0",
        Version::Http11 => "1.1",
        _ => "other",
    };
    format!("{} {same} {} {:?} {proto}", hm, uri.path(), uri.query())
}

fn bytes(b: Bytes) -> String {
    format!("{} bytes", b.len())
}

fn text(s: String) -> String {
    s
}

fn maybe(body: Result<Json<NewUser>, Rejection>) -> String {
    match body {
        Ok(Json(u)) => u.name,
        Err(r) => format!("not a user ({})", r.status()),
    }
}

fn mine(Bearer(t): Bearer, Shout(s): Shout) -> String {
    format!("{t}: {s}")
}

fn both(Path(id): Path<u32>, State(db): State<Db>, Json(u): Json<NewUser>) -> String {
    format!("{id} {} {}", db.name, u.name)
}

/// Every extractor, as a sync handler below `/s` and an `async` one below `/a`.
fn router() -> Router {
    let sync = Router::new()
        .get("/items/{id}", handler(item))
        .get("/teams/{team}/members/{id}", handler(member))
        .get("/orgs/{org}/repos/{repo}", handler(repo))
        .get("/stray/{org}/{repo}", handler(|Path(s): Path<Stray>| s.org))
        .get("/two/{a}/{b}", handler(item))
        .get("/orders/{status}", handler(order))
        .get("/list", handler(list))
        .post("/users", handler(create))
        .post("/form", handler(form))
        .get("/db", handler(db))
        .get("/missing", handler(|State(_): State<Missing>| "?"))
        .get("/caller", handler(caller))
        .get("/headers", handler(headers))
        .get("/meta", handler(meta))
        .post("/bytes", handler(bytes))
        .post("/text", handler(text))
        .post("/maybe", handler(maybe))
        .post("/mine", handler(mine))
        .post("/both/{id}", handler(both))
        .get("/none", handler(|| "no arguments"));
    let async_ = Router::new()
        .get_async(
            "/items/{id}",
            OnWorker,
            handler_async(|p| async move { item(p) }),
        )
        .get_async(
            "/teams/{team}/members/{id}",
            OnWorker,
            handler_async(|p| async move { member(p) }),
        )
        .get_async(
            "/orgs/{org}/repos/{repo}",
            OnWorker,
            handler_async(|p| async move { repo(p) }),
        )
        .get_async(
            "/stray/{org}/{repo}",
            OnWorker,
            handler_async(|Path(s): Path<Stray>| async move { s.org }),
        )
        .get_async(
            "/two/{a}/{b}",
            OnWorker,
            handler_async(|p| async move { item(p) }),
        )
        .get_async(
            "/orders/{status}",
            OnWorker,
            handler_async(|p| async move { order(p) }),
        )
        .get_async("/list", OnWorker, handler_async(|q| async move { list(q) }))
        .post_async(
            "/users",
            OnWorker,
            handler_async(|j| async move { create(j) }),
        )
        .post_async("/form", OnWorker, handler_async(|f| async move { form(f) }))
        .get_async("/db", OnWorker, handler_async(|s| async move { db(s) }))
        .get_async(
            "/missing",
            OnWorker,
            handler_async(|State(_): State<Missing>| async { "?" }),
        )
        .get_async(
            "/caller",
            OnWorker,
            handler_async(|e| async move { caller(e) }),
        )
        .get_async(
            "/headers",
            OnWorker,
            handler_async(|h| async move { headers(h) }),
        )
        .get_async(
            "/meta",
            OnWorker,
            handler_async(|m, hm, u, v| async move { meta(m, hm, u, v) }),
        )
        .post_async(
            "/bytes",
            OnWorker,
            handler_async(|b| async move { bytes(b) }),
        )
        .post_async("/text", OnWorker, handler_async(|t| async move { text(t) }))
        .post_async(
            "/maybe",
            OnWorker,
            handler_async(|b| async move { maybe(b) }),
        )
        .post_async(
            "/mine",
            OnWorker,
            handler_async(|b, s| async move { mine(b, s) }),
        )
        .post_async(
            "/both/{id}",
            OnWorker,
            handler_async(|p, s, j| async move { both(p, s, j) }),
        )
        .get_async(
            "/none",
            OnWorker,
            handler_async(|| async { "no arguments" }),
        );
    Router::new()
        .nest("/s", sync)
        .nest("/a", async_)
        .layer(Tag)
        .with_state(Db { name: "main" })
}

/// (method, path below the prefix, content type, body, status, body wanted: "" for a
/// rejection, which is checked for a message instead)
type Row = (
    &'static str,
    &'static str,
    Option<&'static str>,
    &'static str,
    u16,
    &'static str,
);

const JSON: Option<&str> = Some("application/json");
const FORM: Option<&str> = Some("application/x-www-form-urlencoded");

const ROWS: &[Row] = &[
    // Path: one value, percent-decoded, or 400 as `param_as`.
    ("GET", "/items/12", None, "", 200, "item 12"),
    ("GET", "/items/%31%32", None, "", 200, "item 12"),
    ("GET", "/items/twelve", None, "", 400, ""),
    ("GET", "/items/-1", None, "", 400, ""),
    ("GET", "/items/%ff", None, "", 400, ""),
    // Path: a tuple in pattern order, a struct by name, an enum's unit variant.
    ("GET", "/teams/a%20b/members/3", None, "", 200, "a b #3"),
    ("GET", "/teams/ab/members/x", None, "", 400, ""),
    (
        "GET",
        "/orgs/rust-lang/repos/rust",
        None,
        "",
        200,
        "rust-lang/rust",
    ),
    ("GET", "/orders/open", None, "", 200, "Open"),
    ("GET", "/orders/shipped", None, "", 400, ""),
    // The type and the route disagree: the program's error.
    ("GET", "/two/1/2", None, "", 500, ""),
    ("GET", "/stray/a/b", None, "", 500, ""),
    // Query (400), Json (415, 400, 422), Form (415, 422).
    (
        "GET",
        "/list?page=2&tag=a+b",
        None,
        "",
        200,
        r#"{"page":2,"tag":"a b"}"#,
    ),
    ("GET", "/list?page=two", None, "", 400, ""),
    ("GET", "/list", None, "", 400, ""),
    (
        "POST",
        "/users",
        JSON,
        r#"{"name":"ann","age":7}"#,
        201,
        "ann 7",
    ),
    (
        "POST",
        "/users",
        Some("application/json; charset=utf-8"),
        r#"{"name":"ann","age":7}"#,
        201,
        "ann 7",
    ),
    (
        "POST",
        "/users",
        Some("text/plain"),
        r#"{"name":"ann","age":7}"#,
        415,
        "",
    ),
    ("POST", "/users", None, r#"{"name":"ann","age":7}"#, 415, ""),
    ("POST", "/users", JSON, r#"{"name":"ann","#, 400, ""),
    (
        "POST",
        "/users",
        JSON,
        r#"{"name":"ann","age":700}"#,
        422,
        "",
    ),
    (
        "POST",
        "/users",
        JSON,
        r#"{"name":"a\"b","age":7}"#,
        201,
        "a\"b 7",
    ),
    ("POST", "/form", FORM, "name=b%C3%A9a&age=3", 200, "béa 3"),
    ("POST", "/form", JSON, "name=bea&age=3", 415, ""),
    ("POST", "/form", FORM, "name=bea&age=old", 422, ""),
    // State, and a state the router lacks (500).
    ("GET", "/db", None, "", 200, "main"),
    ("GET", "/missing", None, "", 500, ""),
    // Extension: none attached is 500 (the route is not under a layer that attaches it).
    ("GET", "/caller", None, "", 500, ""),
    // Bytes, String (400 when not UTF-8, below), a Result of the extraction.
    ("POST", "/bytes", None, "abcd", 200, "4 bytes"),
    ("POST", "/bytes", None, "", 200, "0 bytes"),
    ("POST", "/text", None, "héllo", 200, "héllo"),
    (
        "POST",
        "/maybe",
        JSON,
        r#"{"name":"cy","age":1}"#,
        200,
        "cy",
    ),
    ("POST", "/maybe", JSON, "[]", 200, "not a user (422)"),
    ("POST", "/maybe", None, "{}", 200, "not a user (415)"),
    // Several: the first that fails answers.
    (
        "POST",
        "/both/5",
        JSON,
        r#"{"name":"dee","age":2}"#,
        200,
        "5 main dee",
    ),
    ("POST", "/both/x", Some("text/plain"), "{", 400, ""),
    ("POST", "/both/5", Some("text/plain"), "{", 415, ""),
    ("GET", "/none", None, "", 200, "no arguments"),
];

/// Sends one row to `prefix` and checks its answer.
fn check(c: &TestClient, protocol: Protocol, prefix: &str, row: &Row) {
    let &(method, path, ct, body, status, want) = row;
    let method = if method == "GET" {
        Method::Get
    } else {
        Method::Post
    };
    let target = format!("{prefix}{path}");
    let mut r = c.request(method, &target);
    if let Some(ct) = ct {
        r = r.header("content-type", ct);
    }
    if !body.is_empty() {
        r = r.body(body);
    }
    let r = r.send();
    assert_eq!(
        r.status(),
        status,
        "{protocol:?} {target} {body}: {}",
        r.text()
    );
    if want.is_empty() {
        assert_eq!(r.header("content-type"), Some("text/plain"), "{target}");
        assert!(
            r.text().ends_with('\n') && r.text().len() > 10,
            "{target}: a message: {}",
            r.text()
        );
    } else {
        assert_eq!(r.text(), want, "{protocol:?} {target} {body}");
    }
}

#[test]
fn every_extractor_answers_its_value_or_its_rejection_sync_and_async() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(router()).protocol(protocol);
        for prefix in ["/s", "/a"] {
            for row in ROWS {
                check(&c, protocol, prefix, row);
            }
            // Extension: the value the sync layer attached.
            let r = c
                .get(&format!("{prefix}/caller"))
                .header("x-caller", "eve")
                .send();
            assert_eq!(r.text(), "eve", "{protocol:?} {prefix}");
            // HeaderMap: names lower-cased, every value kept.
            let r = c
                .get(&format!("{prefix}/headers"))
                .header("X-User", "fay")
                .header("x-multi", "1")
                .header("x-multi", "2")
                .send();
            assert_eq!(r.text(), "fay 2", "{protocol:?} {prefix}");
            // The method both ways, the target, the version.
            let r = c.get(&format!("{prefix}/meta?x=1")).send();
            let version = match protocol {
                Protocol::Http1 => "1.1",
                _ => "other",
            };
            assert_eq!(
                r.text(),
                format!("GET true {prefix}/meta Some(\"x=1\") {version}"),
                "{protocol:?}"
            );
            // A body that is not UTF-8 is no String (400) but is Bytes.
            let r = c
                .post(&format!("{prefix}/text"))
                .body(vec![0xff, 0xfe])
                .send();
            assert_eq!(r.status(), 400, "{protocol:?} {prefix}");
            let r = c
                .post(&format!("{prefix}/bytes"))
                .body(vec![0xff, 0xfe])
                .send();
            assert_eq!(r.text(), "2 bytes", "{protocol:?} {prefix}");
            // Extractors of one's own: a parts one with its own rejection, a body one.
            let r = c.post(&format!("{prefix}/mine")).body("hi").send();
            assert_eq!(r.status(), 401, "{protocol:?} {prefix}");
            assert_eq!(r.header("www-authenticate"), Some("Bearer"));
            let r = c
                .post(&format!("{prefix}/mine"))
                .header("authorization", "Bearer t1")
                .body("hi")
                .send();
            assert_eq!(r.text(), "t1: HI", "{protocol:?} {prefix}");
            let r = c
                .post(&format!("{prefix}/mine"))
                .header("authorization", "Bearer t1")
                .send();
            assert_eq!(r.status(), 400, "{protocol:?} {prefix}");
            assert_eq!(r.text(), "nothing to shout\n");
        }
    }
}

/// How many times `counted` ran.
static CALLED: AtomicUsize = AtomicUsize::new(0);

fn counted(Path(_): Path<u32>, Json(_): Json<NewUser>) -> &'static str {
    CALLED.fetch_add(1, Ordering::SeqCst);
    "called"
}

#[test]
fn a_handler_whose_extractor_fails_is_not_called() {
    let c = TestClient::new(Router::new().post("/c/{id}", handler(counted)));
    let send = |path: &str, ct: &str| {
        c.post(path)
            .header("content-type", ct)
            .body(r#"{"name":"a","age":1}"#)
            .send()
            .status()
    };
    assert_eq!(send("/c/x", "application/json"), 400);
    assert_eq!(send("/c/1", "text/plain"), 415);
    assert_eq!(CALLED.load(Ordering::SeqCst), 0);
    assert_eq!(send("/c/1", "application/json"), 200);
    assert_eq!(CALLED.load(Ordering::SeqCst), 1);
}

/// Sync and `async` handlers with typed arguments under an async layer (`tag`).
fn around_app() -> Router {
    Router::new().group(|g| {
        g.get(
            "/s/{id}",
            handler(|Path(id): Path<u32>, Extension(c): Extension<Caller>| format!("{id} {}", c.0)),
        )
        .get_async(
            "/a/{id}",
            OnWorker,
            handler_async(
                |Path(id): Path<u32>, Extension(c): Extension<Caller>| async move {
                    format!("{id} {}", c.0)
                },
            ),
        )
        .around(tag)
    })
}

/// Typed handlers, sync and `async`, under an async layer (the chain's way in): the value
/// the layer attached reaches them as an `Extension`, and their rejections pass back
/// through it.
#[test]
fn typed_handlers_under_an_async_layer_take_its_extensions() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(around_app()).protocol(protocol);
        for prefix in ["/s", "/a"] {
            let r = c
                .get(&format!("{prefix}/4"))
                .header("x-token", "abc")
                .send();
            assert_eq!(r.text(), "4 token 3", "{protocol:?} {prefix}");
            assert_eq!(r.header("x-around"), Some("yes"));
            let r = c
                .get(&format!("{prefix}/x"))
                .header("x-token", "abc")
                .send();
            assert_eq!(r.status(), 400, "{protocol:?} {prefix}");
            assert_eq!(
                r.header("x-around"),
                Some("yes"),
                "the rejection passes the layer"
            );
            let r = c.get(&format!("{prefix}/4")).send();
            assert_eq!(r.status(), 500, "{protocol:?} {prefix}: no extension");
        }
    }
}

#[derive(Deserialize, Debug, PartialEq)]
struct Problem {
    status: u16,
    error: String,
}

/// [`router`], its errors rendered as `{"status":…,"error":…}`.
fn rendered() -> Router {
    router().layer(ErrorRenderer(|status: u16, message: &str| {
        #[derive(Serialize)]
        struct P<'a> {
            status: u16,
            error: &'a str,
        }
        (
            status,
            Json(P {
                status,
                error: message,
            }),
        )
            .into_response()
    }))
}

#[test]
fn an_error_renderer_renders_an_extractors_rejection_as_json() {
    for protocol in PROTOCOLS {
        let c = TestClient::new(rendered()).protocol(protocol);
        for prefix in ["/s", "/a"] {
            let r = c
                .post(&format!("{prefix}/users"))
                .header("content-type", "text/plain")
                .body("{}")
                .send();
            assert_eq!(r.status(), 415);
            assert_eq!(r.header("content-type"), Some("application/json"));
            let p: Problem = r.json().expect("a JSON problem");
            assert_eq!(p.status, 415);
            assert!(
                p.error.starts_with("expected a body with Content-Type"),
                "{}",
                p.error
            );

            let r = c.get(&format!("{prefix}/items/x")).send();
            let p: Problem = r.json().expect("a JSON problem");
            assert_eq!(
                p,
                Problem {
                    status: 400,
                    error: "invalid path parameter id: expected u32".into()
                }
            );
            // An extractor's own rejection that is a whole answer stays its own.
            let r = c.post(&format!("{prefix}/mine")).body("x").send();
            assert_eq!((r.status(), r.text().as_str()), (401, "who are you?"));
        }
    }
}

/// The body of a GET of `path` from a real server (HTTP/1.1, one connection each).
fn get(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut got = Vec::new();
    s.read_to_end(&mut got)
        .expect("the whole answer within the read timeout");
    let text = String::from_utf8(got).unwrap();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    text.split("\r\n\r\n").nth(1).unwrap().to_string()
}

/// Per-worker values made so far, in all tests of this binary's `pool` routers.
static MADE: AtomicU32 = AtomicU32::new(0);

/// A stand-in for a pooled client: which value it is, and the thread that made it.
#[derive(Clone)]
struct Pool {
    id: u32,
    thread: String,
}

/// The value's number and the thread that made it, by each way a handler reaches it.
fn pool_router() -> Router {
    let show = |p: Pool| format!("{} {}", p.id, p.thread);
    Router::new()
        .get("/sync", handler(move |Worker(p): Worker<Pool>| show(p)))
        .get_async(
            "/async",
            OnWorker,
            handler_async(move |Worker(p): Worker<Pool>| async move { show(p) }),
        )
        .get("/req", move |req| show(req.worker_value::<Pool>()))
        .get("/none", handler(|Worker(_): Worker<u64>| "?"))
        .with_worker_value(|| Pool {
            id: MADE.fetch_add(1, Ordering::SeqCst) + 1,
            thread: std::thread::current().name().unwrap_or("?").to_string(),
        })
}

/// One value per worker runtime, made on its first use there: each
/// `TestClient` on one thread has its own (made again after another is dropped), every way
/// to reach it in one client sees the same, and a real server's worker makes its own.
#[test]
fn a_worker_value_is_made_once_per_runtime_for_each_test_client_and_worker() {
    let here = std::thread::current().name().unwrap_or("?").to_string();
    let value = |c: &TestClient, path: &str| c.get(path).send().text();
    let first = TestClient::new(pool_router());
    let a = value(&first, "/sync");
    let second = TestClient::new(pool_router()).http2();
    let b = value(&second, "/async");
    assert_ne!(a, b, "each client its own value");
    for path in ["/sync", "/async", "/req"] {
        assert_eq!(value(&first, path), a, "{path}");
        assert_eq!(value(&second, path), b, "{path}");
    }
    assert!(a.ends_with(&here) && b.ends_with(&here), "{a} {b}");
    assert_eq!(
        first.get("/none").send().status(),
        500,
        "no such worker value"
    );
    drop((first, second));
    let third = TestClient::new(pool_router());
    let c = value(&third, "/req");
    assert!(c != a && c != b, "made again for a new client: {c}");
    drop(third);

    let server = TestServer::start(pool_router()).expect("start");
    let get = |path: &str| get(server.addr(), path);
    let d = get("/sync");
    assert!(d.ends_with("linerate-w0"), "made on the worker: {d}");
    assert!(![&a, &b, &c].contains(&&d), "{d}");
    assert_eq!(get("/async"), d);
    assert_eq!(get("/req"), d);
    server.stop().unwrap();
}

/// The case that failed: a pooled reqwest client as a worker value, used by an `async`
/// handler, across two `TestClient`s on one thread and a real server (a
/// `thread_local!` client once failed the second client).
#[test]
fn a_pooled_client_as_a_worker_value_serves_each_test_client_and_a_server() {
    let upstream = TestServer::start(Router::new().get("/hello", |_| "hello")).expect("start");
    #[derive(Clone)]
    struct Upstream(String);
    let app = || {
        Router::new()
            .get_async(
                "/up",
                OnWorker,
                handler_async(
                    |Worker(client): Worker<reqwest::Client>, State(up): State<Upstream>| async move {
                        match client.get(&up.0).send().await {
                            Ok(r) => r.text().await.unwrap_or_else(|e| format!("body: {e}")),
                            Err(e) => format!("error: {e:?}"),
                        }
                    },
                ),
            )
            .with_worker_value(|| {
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(10))
                    .build()
                    .expect("a client")
            })
            .with_state(Upstream(upstream.url("/hello")))
    };
    let first = TestClient::new(app());
    let second = TestClient::new(app());
    for (c, which) in [
        (&first, "first"),
        (&second, "second"),
        (&first, "first again"),
    ] {
        assert_eq!(c.get("/up").send().text(), "hello", "{which}");
    }
    drop((first, second));
    assert_eq!(TestClient::new(app()).get("/up").send().text(), "hello");
    let server = TestServer::start(app()).expect("start");
    for _ in 0..2 {
        assert_eq!(get(server.addr(), "/up"), "hello");
    }
    server.stop().unwrap();
    upstream.stop().unwrap();
}
