//! `examples/users.rs` end to end, in process: its router through the test client (HTTP/1.1
//! and HTTP/2 framing) on a real PostgreSQL (`scripts/pg.sh`), with the runtime driver and
//! (create, read, 404) the worker driver on the client's own worker runtime: the bearer-token group, JSON
//! errors for rejections, the service's own 404 and 503 and the server's 404/405, CORS,
//! request ids, and (on a real server) the event stream a created user is published to.

mod support;

#[path = "../examples/users.rs"]
#[allow(dead_code)]
mod users;

use std::sync::Arc;

use linerate_postgres::{Driver, Pool};
use linerate_server::testing::{Protocol, TestClient, TestResponse, TestServer};
use serde::Deserialize;

#[derive(Deserialize, Debug, PartialEq)]
struct Problem {
    status: u16,
    error: String,
}

#[derive(Deserialize, Debug, PartialEq)]
struct User {
    id: i32,
    name: String,
}

fn problem(r: &TestResponse) -> Problem {
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{}",
        r.text()
    );
    r.json().expect("a JSON problem")
}

#[test]
fn the_users_service_end_to_end() {
    let pg = support::Pg::start();
    // The example's own table, empty: the demo's seed (scripts/pg/schema.sql) has a users
    // table of its own in the same throwaway cluster.
    pg.psql("DROP TABLE users");
    pg.psql(users::SCHEMA);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let mut builder = Pool::builder(&pg.url);
    builder.driver(Driver::Runtime);
    let st = users::prepare(&mut builder);
    let pool = Arc::new(builder.connect(runtime.handle()).expect("connect"));
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let c = TestClient::new(users::app(pool.clone(), st, "secret".into())).protocol(protocol);
        let auth = "Bearer secret";

        let health = c.get("/health").send();
        assert_eq!((health.status(), health.text().as_str()), (200, "ok"));
        assert!(health.header("x-request-id").is_some());

        // The group's layer: no token, no handler.
        let r = c.get("/users/1").send();
        assert_eq!(r.status(), 401, "{protocol:?}");
        assert_eq!(r.header("www-authenticate"), Some("Bearer"));
        assert_eq!(
            problem(&r),
            Problem {
                status: 401,
                error: "a bearer token is required".into()
            }
        );
        let r = c
            .get("/users/1")
            .header("authorization", "Bearer wrong")
            .send();
        assert_eq!(r.status(), 401);

        // Create, then read back.
        let created = c
            .post("/users")
            .header("authorization", auth)
            .json(&serde_json::json!({"name": "ann"}))
            .send();
        assert_eq!(created.status(), 201, "{protocol:?} {}", created.text());
        let user: User = created.json().expect("the created user");
        assert_eq!(user.name, "ann");
        let read = c
            .get(&format!("/users/{}", user.id))
            .header("authorization", auth)
            .send();
        assert_eq!(read.status(), 200);
        assert_eq!(read.json::<User>().expect("a user"), user);
        assert_eq!(
            pg.psql(&format!("SELECT name FROM users WHERE id = {}", user.id)),
            "ann"
        );

        let echoed = c
            .post("/echo")
            .header("authorization", auth)
            .json(&serde_json::json!({"a": [1, 2], "b": "c"}))
            .send();
        assert_eq!(echoed.status(), 200);
        assert_eq!(
            echoed.json::<serde_json::Value>().expect("JSON"),
            serde_json::json!({"a": [1, 2], "b": "c"})
        );
        assert_eq!(c.post("/echo").json(&1).send().status(), 401);

        // Errors, all JSON: the service's 404, the extractors' 400/415/422, the server's own.
        // (path, method, body or none, status)
        let rows: &[(&str, &str, Option<&str>, u16)] = &[
            ("/users/999999", "GET", None, 404),
            ("/users/abc", "GET", None, 400),
            ("/users", "POST", Some("{\"name\": 7}"), 422),
            ("/users", "POST", Some("{"), 400),
            ("/nothing", "GET", None, 404),
        ];
        for &(path, method, body, status) in rows {
            let mut r = match method {
                "GET" => c.get(path),
                _ => c.post(path),
            }
            .header("authorization", auth);
            if let Some(b) = body {
                r = r.header("content-type", "application/json").body(b);
            }
            let r = r.send();
            assert_eq!(r.status(), status, "{protocol:?} {method} {path}");
            assert_eq!(problem(&r).status, status);
        }
        let r = c
            .post("/users")
            .header("authorization", auth)
            .body("name=ann")
            .send();
        assert_eq!(r.status(), 415);
        let r = c.delete("/health").send();
        assert_eq!(
            (r.status(), r.header("allow")),
            (405, Some("GET, HEAD, OPTIONS"))
        );
        assert_eq!(problem(&r).error, "Method Not Allowed");

        // A browser application's preflight, answered before the token is asked for.
        let pre = c
            .options("/users")
            .header("origin", users::APP_ORIGIN)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send();
        assert_eq!(pre.status(), 204);
        assert_eq!(
            pre.header("access-control-allow-origin"),
            Some(users::APP_ORIGIN)
        );
        assert_eq!(
            pre.header("access-control-allow-headers"),
            Some("authorization, content-type")
        );
    }

    // The same service on the worker driver, in process: the client's worker runtime opens the
    // pool's connections (as a worker does before it serves) and runs the handlers' futures.
    let mut wb = Pool::builder(&pg.url);
    wb.driver(Driver::Worker);
    let wst = users::prepare(&mut wb);
    let wpool = Arc::new(wb.connect(runtime.handle()).expect("connect"));
    for protocol in [Protocol::Http1, Protocol::Http2] {
        let start = wpool
            .worker_start(1, support::EVENTUALLY)
            .expect("the worker driver's start");
        let c = TestClient::new(users::app(wpool.clone(), wst, "secret".into()))
            .protocol(protocol)
            .with_worker_start(start)
            .expect("the worker's start");
        let auth = "Bearer secret";
        let created = c
            .post("/users")
            .header("authorization", auth)
            .json(&serde_json::json!({"name": "bea"}))
            .send();
        assert_eq!(created.status(), 201, "{protocol:?} {}", created.text());
        let user: User = created.json().expect("the created user");
        let read = c
            .get(&format!("/users/{}", user.id))
            .header("authorization", auth)
            .send();
        assert_eq!(read.json::<User>().expect("a user"), user, "{protocol:?}");
        let r = c.get("/users/999999").header("authorization", auth).send();
        assert_eq!(problem(&r).status, 404, "{protocol:?}");
    }

    events_reach_subscribers(&pool, st);

    // The database goes away: the service says so at once, as JSON, and comes back.
    pg.down();
    let c = TestClient::new(users::app(pool.clone(), st, "secret".into()));
    let r = support_eventually(
        || {
            c.get("/users/1")
                .header("authorization", "Bearer secret")
                .send()
        },
        503,
    );
    assert_eq!(problem(&r).error, "the database is unavailable");
    pg.up();
    let r = support_eventually(
        || {
            c.get("/users/1")
                .header("authorization", "Bearer secret")
                .send()
        },
        200,
    );
    assert_eq!(r.json::<User>().expect("user 1").name, "ann");
}

/// `GET /users/events` on a real server: refused without the token; with it, a user created
/// by another client arrives as a `user` event on every open subscription.
fn events_reach_subscribers(pool: &Arc<Pool>, st: users::Statements) {
    use std::io::{BufRead, BufReader, Read, Write};
    let srv = TestServer::start(users::app(pool.clone(), st, "secret".into())).expect("server");
    let connect = || {
        let s = std::net::TcpStream::connect(srv.addr()).expect("connect");
        s.set_read_timeout(Some(support::EVENTUALLY)).unwrap();
        s
    };
    let mut s = connect();
    s.write_all(b"GET /users/events HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut refused = String::new();
    s.read_to_string(&mut refused).unwrap();
    assert!(refused.starts_with("HTTP/1.1 401"), "{refused}");
    let subscribe = || {
        let mut s = connect();
        s.write_all(
            b"GET /users/events HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer secret\r\n\r\n",
        )
        .unwrap();
        let mut r = BufReader::new(s);
        let mut head = String::new();
        while !head.ends_with("\r\n\r\n") {
            assert!(r.read_line(&mut head).unwrap() > 0, "{head}");
        }
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            head.contains("Content-Type: text/event-stream\r\n"),
            "{head}"
        );
        r
    };
    let mut subs = [subscribe(), subscribe()];
    let body = r#"{"name":"eve"}"#;
    let mut post = connect();
    write!(
        post,
        "POST /users HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer secret\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut created = String::new();
    post.read_to_string(&mut created).unwrap();
    assert!(created.starts_with("HTTP/1.1 201"), "{created}");
    let user: User = serde_json::from_str(created.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    let want = format!(
        "event: user\nid: {}\ndata: {{\"id\":{},\"name\":\"eve\"}}\n\n",
        user.id, user.id
    );
    for r in &mut subs {
        // One chunk: its size line, the event, the chunk's CRLF.
        let mut size = String::new();
        r.read_line(&mut size).unwrap();
        let mut event = vec![0; usize::from_str_radix(size.trim_end(), 16).unwrap()];
        r.read_exact(&mut event).unwrap();
        assert_eq!(String::from_utf8(event).unwrap(), want);
    }
}

/// `request` again until it answers `status` (the pool notices an outage, and a restart, on
/// its own time); bounded by support::EVENTUALLY.
fn support_eventually(request: impl Fn() -> TestResponse, status: u16) -> TestResponse {
    let end = std::time::Instant::now() + support::EVENTUALLY;
    loop {
        let r = request();
        if r.status() == status || std::time::Instant::now() > end {
            assert_eq!(r.status(), status, "{}", r.text());
            return r;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
