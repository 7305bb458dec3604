//! The demo application `linerate serve` runs by default: the TechEmpower contract
//! (`/json`, `/plaintext`), the HttpArena contract (`/baseline11`, `/pipeline`,
//! `/json/{count}`, `/upload`, production-stack's `/public/baseline` and `/public/json/{count}`,
//! async's `/delay/{ms}`, 8gbit's `POST /echo` over TLS) and the endpoints the public
//! conformance suites assume (`GET /` a page listing the endpoints, `POST /` echoes its body,
//! `GET /echo` and, in cleartext, `POST /echo` the request's header fields one per line,
//! `GET /cookie` the parsed cookies).
//!
//! Owns only application behaviour, written against the public handler API like any user's
//! app. The 50-item dataset is `data/dataset.json`, compiled in and parsed once at start, or a
//! file given with `--dataset` ([`load_dataset`]).
#![forbid(unsafe_code)]

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use linerate_server::{Body, BodySink, Request, Response, Router};

mod delay;
mod echo;

pub use delay::MAX_DELAY_MS;

/// The dataset shipped with the binary.
pub const DATASET_JSON: &str = include_str!("../data/dataset.json");
/// Most items `/json/{count}` returns.
pub const MAX_ITEMS: usize = 50;

/// One dataset item (all numbers are integers).
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Item {
    pub id: i64,
    pub name: String,
    pub category: String,
    pub price: i64,
    pub quantity: i64,
    pub active: bool,
    pub tags: Vec<String>,
    pub rating: Rating,
}

/// An item's rating.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Rating {
    pub score: i64,
    pub count: i64,
}

#[derive(Serialize)]
struct ItemOut<'a> {
    id: i64,
    name: &'a str,
    category: &'a str,
    price: i64,
    quantity: i64,
    active: bool,
    tags: &'a [String],
    rating: &'a Rating,
    total: i64,
}

#[derive(Serialize)]
struct Items<'a> {
    items: Vec<ItemOut<'a>>,
    count: usize,
}

/// The dataset compiled into the binary.
pub fn builtin_dataset() -> Vec<Item> {
    serde_json::from_str(DATASET_JSON).expect("dataset.json is valid")
}

/// Why a `--dataset` file was refused.
#[derive(Debug)]
pub enum DatasetError {
    /// The file could not be read.
    Read(std::io::Error),
    /// Not a JSON array of items (the message names line and column).
    Json(serde_json::Error),
    /// An empty array: `/json/{count}` would have nothing to answer with.
    Empty,
}

impl std::fmt::Display for DatasetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatasetError::Read(e) => write!(f, "{e}"),
            DatasetError::Json(e) => write!(f, "not a JSON array of dataset items: {e}"),
            DatasetError::Empty => f.write_str("the array holds no items"),
        }
    }
}

impl std::error::Error for DatasetError {}

/// Reads and validates a dataset file (HttpArena's `/data/dataset.json` shape: an array of
/// items with integer prices, quantities and ratings).
pub fn load_dataset(path: &std::path::Path) -> Result<Vec<Item>, DatasetError> {
    let text = std::fs::read(path).map_err(DatasetError::Read)?;
    let items: Vec<Item> = serde_json::from_slice(&text).map_err(DatasetError::Json)?;
    if items.is_empty() {
        return Err(DatasetError::Empty);
    }
    Ok(items)
}

/// The demo routes over the compiled-in dataset.
pub fn router() -> Router {
    router_with(builtin_dataset())
}

/// The demo routes over `dataset`, its gRPC services included.
pub fn router_with(dataset: Vec<Item>) -> Router {
    with_grpc(http_routes(dataset))
}

/// The demo's routes over `dataset` without its gRPC services: for a server none of whose
/// listeners speaks HTTP/2, which `Server::bind` refuses with gRPC services (`serve
/// --no-h2c-preface`, or a configuration file's plain listeners).
pub fn http_routes(dataset: Vec<Item>) -> Router {
    let dataset = Arc::new(dataset);
    let public_dataset = dataset.clone();
    // Routes are tried in order: the benchmarked ones first, TechEmpower's as its entry
    // serves them.
    linerate_techempower::plain_routes(Router::new())
        .get("/pipeline", |_| Response::text("ok"))
        .get("/baseline11", |req| baseline(req, None))
        .post("/baseline11", |req| baseline(req, Some(req.body())))
        // HttpArena's HTTP/2 profiles (baseline-h2, baseline-h2c): the same sum.
        .get("/baseline2", |req| baseline(req, None))
        .get("/json/{count}", move |req| items(req, &dataset))
        .streaming(linerate_http1::Method::Post, "/upload", |_| {
            Box::new(Counter(0))
        })
        .get("/", |_| {
            Response::text(INDEX_HTML).content_type("text/html; charset=utf-8")
        })
        .post("/", echo_body)
        .get("/echo", echo_headers)
        // HttpArena's 8gbit over TLS (the body, streamed back); Http11Probe's fields in
        // cleartext.
        .deferred_incoming(linerate_http1::Method::Post, "/echo", echo::echo)
        // HttpArena's async profile: one timer per worker, no thread or task per request.
        .deferred(linerate_http1::Method::Get, "/delay/{ms}", delay::delay)
        .get("/cookie", cookies)
        // HttpArena's production-stack: the edge passes `/public/*` on without a token.
        .get("/public/baseline", |req| baseline(req, None))
        .get("/public/json/{count}", move |req| {
            items(req, &public_dataset)
        })
        // HttpArena's echo-ws profile: text and binary echoed, pings answered, a clean close.
        // Compression on: a client that offers permessage-deflate gets it (Autobahn's 12.x
        // and 13.x run here); HttpArena's clients offer none, so its echo is unchanged.
        .ws_with(
            "/ws",
            linerate_server::websocket::WsOptions {
                compression: true,
                ..Default::default()
            },
            |_, _| Ok(WsEcho),
        )
}

/// `router` with the demo's gRPC services.
pub fn with_grpc(router: Router) -> Router {
    router
        // HttpArena's unary-grpc profiles, and gRPC's interop test service.
        .grpc(crate::grpc::BenchmarkServiceServer::new(
            crate::grpc::Benchmark,
        ))
        .grpc(crate::grpc::TestServiceServer::new(crate::grpc::Interop))
        // The standard services, so grpcurl-style tools list, describe and check the demo:
        // health (everything SERVING) and reflection over linerate-grpc's descriptors.
        .grpc(linerate_server::grpc::Health::new())
        .grpc(linerate_server::grpc::Reflection::new())
}

/// `/ws`: every message back as it came.
struct WsEcho;

impl linerate_server::websocket::WsHandler for WsEcho {
    fn on_message(
        &mut self,
        msg: linerate_server::websocket::Message<'_>,
        out: &mut linerate_server::websocket::WsOut<'_>,
    ) {
        out.send(msg);
    }
}

/// `a + b` from the query, plus the body's integer for POST.
fn baseline(req: &Request<'_>, body: Option<&[u8]>) -> Response {
    let int = |name: &str| {
        req.query_param(name)
            .and_then(|v| v.trim().parse::<i64>().ok())
    };
    let (Some(a), Some(b)) = (int("a"), int("b")) else {
        return bad("a and b must be integers");
    };
    let mut sum = a.checked_add(b);
    if let Some(body) = body {
        let Some(n) = std::str::from_utf8(body)
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
        else {
            return bad("body must be an integer");
        };
        sum = sum.and_then(|s| s.checked_add(n));
    }
    match sum {
        Some(s) => Response::text_owned(s.to_string()),
        None => bad("overflow"),
    }
}

/// The first `count` items, each with `total = price * quantity * m`.
fn items(req: &Request<'_>, dataset: &[Item]) -> Response {
    let Some(count) = req
        .param("count")
        .and_then(|c| c.parse::<usize>().ok())
        .filter(|c| (1..=MAX_ITEMS).contains(c))
    else {
        return bad("count must be an integer from 1 to 50");
    };
    let m = match req.query_param("m") {
        None => 1,
        Some(v) => match v.parse::<i64>() {
            Ok(m) => m,
            Err(_) => return bad("m must be an integer"),
        },
    };
    match items_page(dataset, count, m) {
        Some(page) => Response::json(&page),
        None => bad("overflow"),
    }
}

/// The `/json/{count}?m=M` answer before serialization: the first `count` items, each with
/// `total = price * quantity * m`; `None` when a total overflows. Public so benchmarks measure
/// the body the handler sends.
pub fn items_page(dataset: &[Item], count: usize, m: i64) -> Option<impl Serialize + '_> {
    let mut out = Vec::with_capacity(count);
    for it in dataset.iter().take(count) {
        let total = it.price.checked_mul(it.quantity)?.checked_mul(m)?;
        out.push(ItemOut {
            id: it.id,
            name: &it.name,
            category: &it.category,
            price: it.price,
            quantity: it.quantity,
            active: it.active,
            tags: &it.tags,
            rating: &it.rating,
            total,
        });
    }
    let count = out.len();
    Some(Items { items: out, count })
}

/// `GET /`: what the demo answers, as a page.
const INDEX_HTML: &str = "<!DOCTYPE html>
<html lang=\"en\"><head><meta charset=\"utf-8\"><title>linerate demo</title></head>
<body><h1>linerate demo</h1>
<table>
<tr><td>GET</td><td><a href=\"/json\">/json</a></td><td>{\"message\":\"Hello, World!\"} (TechEmpower)</td></tr>
<tr><td>GET</td><td><a href=\"/plaintext\">/plaintext</a></td><td>Hello, World! (TechEmpower)</td></tr>
<tr><td>GET, POST</td><td><a href=\"/baseline11?a=13&amp;b=42\">/baseline11?a=13&amp;b=42</a></td><td>a + b, plus the POST body's integer (HttpArena)</td></tr>
<tr><td>GET</td><td><a href=\"/baseline2?a=13&amp;b=42\">/baseline2?a=13&amp;b=42</a></td><td>a + b (HttpArena's HTTP/2 profiles)</td></tr>
<tr><td>GET</td><td><a href=\"/pipeline\">/pipeline</a></td><td>ok (HttpArena)</td></tr>
<tr><td>GET</td><td><a href=\"/json/10?m=2\">/json/{count}?m=M</a></td><td>the first count (1-50) dataset items with totals (HttpArena)</td></tr>
<tr><td>GET</td><td><a href=\"/public/baseline?a=13&amp;b=42\">/public/baseline</a>, /public/json/{count}</td><td>the same, as HttpArena's production-stack names them</td></tr>
<tr><td>POST</td><td>/upload</td><td>the number of body bytes received (HttpArena)</td></tr>
<tr><td>GET</td><td><a href=\"/delay/37\">/delay/{ms}</a></td><td>ms (0-10000), answered after ms milliseconds (HttpArena's async)</td></tr>
<tr><td>POST</td><td>/</td><td>the request body, echoed</td></tr>
<tr><td>GET, POST</td><td><a href=\"/echo\">/echo</a></td><td>the request's header fields, one per line; POST over HTTPS: the body back, streamed (HttpArena's 8gbit)</td></tr>
<tr><td>GET</td><td><a href=\"/cookie\">/cookie</a></td><td>the request's cookies, parsed, one name=value per line</td></tr>
</table></body></html>
";

/// `POST /`: the body back.
fn echo_body(req: &Request<'_>) -> Response {
    Response::new(200)
        .content_type("application/octet-stream")
        .body(Body::Owned(req.body().to_vec()))
}

/// `GET /echo` (and `POST /echo` in cleartext): the request's header fields as received,
/// `name: value` per line.
fn echo_headers(req: &Request<'_>) -> Response {
    let mut out = String::new();
    for (name, value) in req.headers() {
        out.push_str(&String::from_utf8_lossy(name));
        out.push_str(": ");
        out.push_str(&String::from_utf8_lossy(value));
        out.push('\n');
    }
    Response::text_owned(out)
}

/// `GET /cookie`: every `Cookie` field's pairs (RFC 6265 §5.2: split at `;`, name before the
/// first `=`, surrounding whitespace trimmed, a pair without `=` or without a name ignored),
/// `name=value` per line.
fn cookies(req: &Request<'_>) -> Response {
    let mut out = String::new();
    for (name, value) in req.headers() {
        if !name.eq_ignore_ascii_case(b"cookie") {
            continue;
        }
        for (n, v) in parse_cookies(value) {
            out.push_str(&String::from_utf8_lossy(n));
            out.push('=');
            out.push_str(&String::from_utf8_lossy(v));
            out.push('\n');
        }
    }
    Response::text_owned(out)
}

/// The name-value pairs of one `Cookie` field value.
pub fn parse_cookies(value: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    value.split(|&b| b == b';').filter_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let name = pair[..eq].trim_ascii();
        (!name.is_empty()).then(|| (name, pair[eq + 1..].trim_ascii()))
    })
}

fn bad(why: &'static str) -> Response {
    Response::text(why).status(400)
}

/// Counts upload bytes as they stream in.
struct Counter(u64);

impl BodySink for Counter {
    fn data(&mut self, chunk: &[u8]) {
        self.0 += chunk.len() as u64;
    }
    fn finish(self: Box<Self>, _req: &Request<'_>) -> Response {
        Response::text_owned(self.0.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::parse_cookies;

    #[test]
    fn cookie_pairs() {
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("foo=bar", &[("foo", "bar")]),
            ("a=1; b=2; c=3", &[("a", "1"), ("b", "2"), ("c", "3")]),
            ("foo=", &[("foo", "")]),
            (
                "a=hello world; b=x=y",
                &[("a", "hello world"), ("b", "x=y")],
            ),
            ("===;;;", &[]),
            ("novalue; =nameless; ok=1", &[("ok", "1")]),
            ("", &[]),
        ];
        for (input, want) in cases {
            let got: Vec<(String, String)> = parse_cookies(input.as_bytes())
                .map(|(n, v)| {
                    (
                        String::from_utf8(n.to_vec()).unwrap(),
                        String::from_utf8(v.to_vec()).unwrap(),
                    )
                })
                .collect();
            let want: Vec<(String, String)> = want
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect();
            assert_eq!(got, want, "{input:?}");
        }
    }
}
