//! Serves one request shape many times through the in-process test client, for counting
//! under callgrind what a handler with typed arguments (`Path<u32>`, `State<Arc<Db>>`,
//! `Json<T>`) costs against the same handler reading the request with the `req.…`
//! accessors (`param_as`, `state`, `json`), a route with no extraction at all, and the
//! `HeaderMap` extractor against `req.header`.
//!
//! Owns nothing but the loops, one function per kind (`typed`, `accessors`, `plain`,
//! `header_map`, `header`), whose inclusive counts callgrind_annotate reads; each divides by
//! the count:
//!
//!     cargo build -p linerate-server --example extractor_cost
//!     valgrind --tool=callgrind --callgrind-out-file=/tmp/ec.out \
//!         target/debug/examples/extractor_cost 2000
//!     callgrind_annotate --inclusive=yes /tmp/ec.out | grep -E 'extractor_cost::|Handler'

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::Arc;

use linerate_server::testing::TestClient;
use linerate_server::{HeaderMap, Json, Path, Rejection, Request, Router, State, handler};

struct Db {
    name: &'static str,
}

#[derive(serde::Deserialize)]
struct NewUser {
    name: String,
    age: u8,
}

/// The typed handler.
fn create_typed(Path(id): Path<u32>, State(db): State<Arc<Db>>, Json(u): Json<NewUser>) -> String {
    answer(id, &db, &u)
}

/// The same with the accessors.
fn create_accessors(req: &Request<'_>) -> Result<String, Rejection> {
    let id: u32 = req.param_as("id")?;
    let db = req.state::<Arc<Db>>();
    let u: NewUser = req.json()?;
    Ok(answer(id, db, &u))
}

/// What both answer (not inlined, so that both call the same code).
#[inline(never)]
fn answer(id: u32, db: &Db, u: &NewUser) -> String {
    format!("{id} {} {} {}", db.name, u.name, u.age)
}

/// A field, from the `HeaderMap` extractor.
fn user_agent_typed(h: HeaderMap) -> String {
    let v = h.get("user-agent").map(|v| v.as_bytes()).unwrap_or(b"");
    String::from_utf8_lossy(v).into_owned()
}

/// The same field, read in place.
fn user_agent(req: &Request<'_>) -> String {
    String::from_utf8_lossy(req.header("user-agent").unwrap_or(b"")).into_owned()
}

fn app() -> Router {
    Router::new()
        .post("/typed/{id}", handler(create_typed))
        .post("/accessors/{id}", create_accessors)
        .post("/plain/{id}", |req| req.body().len().to_string())
        .post("/header_map/{id}", handler(user_agent_typed))
        .post("/header/{id}", user_agent)
        .with_state(Arc::new(Db { name: "main" }))
}

const BODY: &str = r#"{"name":"ann","age":7}"#;

/// `count` requests to `/{kind}/7` with the JSON body.
fn run(client: &TestClient, kind: &str, count: u64) {
    let target = format!("/{kind}/7");
    for _ in 0..count {
        let res = client
            .post(&target)
            .header("content-type", "application/json")
            .header("user-agent", "extractor_cost/1")
            .header("accept", "*/*")
            .header("x-request-id", "7f1c")
            .body(BODY)
            .send();
        assert_eq!(res.status(), 200, "{}", res.text());
        black_box(res);
    }
}

#[inline(never)]
fn typed(client: &TestClient, count: u64) {
    run(client, "typed", count);
}

#[inline(never)]
fn accessors(client: &TestClient, count: u64) {
    run(client, "accessors", count);
}

#[inline(never)]
fn plain(client: &TestClient, count: u64) {
    run(client, "plain", count);
}

#[inline(never)]
fn header_map(client: &TestClient, count: u64) {
    run(client, "header_map", count);
}

#[inline(never)]
fn header(client: &TestClient, count: u64) {
    run(client, "header", count);
}

fn main() -> ExitCode {
    let Some(Ok(count)) = std::env::args().nth(1).map(|c| c.parse::<u64>()) else {
        eprintln!("usage: extractor_cost COUNT");
        return ExitCode::FAILURE;
    };
    let client = TestClient::new(app());
    // Warm: the first request of each kind makes what later ones reuse.
    for kind in ["typed", "accessors", "plain", "header_map", "header"] {
        run(&client, kind, 1);
    }
    typed(&client, count);
    accessors(&client, count);
    plain(&client, count);
    header_map(&client, count);
    header(&client, count);
    ExitCode::SUCCESS
}
